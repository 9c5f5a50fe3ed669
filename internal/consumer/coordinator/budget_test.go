package coordinator

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/kinesis"
	"github.com/connect-kinesis/connect-kinesis/internal/consumer"
	"github.com/connect-kinesis/connect-kinesis/internal/consumer/budget"
	"github.com/connect-kinesis/connect-kinesis/internal/consumer/consumertest"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// largeAnswers serves consumertest.Kinesis's records padded to size bytes, at most
// budget.MaxAnswerBytes of data per answer as Kinesis does, and follows the bytes
// the input holds from outside the budget: data answered by GetRecords
// minus data the test acked.
type largeAnswers struct {
	*consumertest.Kinesis
	size     int
	answered atomic.Int64
	acked    atomic.Int64
	peak     atomic.Int64
	// largest is the largest answer, in data bytes.
	largest atomic.Int64
}

func (l *largeAnswers) GetRecords(ctx context.Context, in *kinesis.GetRecordsInput, opts ...func(*kinesis.Options)) (*kinesis.GetRecordsOutput, error) {
	cp := *in
	cp.Limit = aws.Int32(min(aws.ToInt32(in.Limit), int32(budget.MaxAnswerBytes/l.size)))
	out, err := l.Kinesis.GetRecords(ctx, &cp, opts...)
	if err != nil {
		return out, err
	}
	var n int64
	for i := range out.Records {
		data := make([]byte, l.size)
		copy(data, out.Records[i].Data)
		out.Records[i].Data = data
		n += int64(l.size)
	}
	held := l.answered.Add(n) - l.acked.Load()
	for p := l.peak.Load(); held > p && !l.peak.CompareAndSwap(p, held); p = l.peak.Load() {
	}
	for p := l.largest.Load(); n > p && !l.largest.CompareAndSwap(p, n); p = l.largest.Load() {
	}
	return out, nil
}

// slowPipeline takes every batch, keeps it for hold and acks it, until
// want records arrived or ctx ends. It returns the data of every record in
// arrival order per shard, and each shard's batch count at every delivery.
func slowPipeline(ctx context.Context, c *Consumer, api *largeAnswers, want int, hold time.Duration, delivered func(shard string, got map[string][]string)) map[string][]string {
	got := map[string][]string{}
	var wg sync.WaitGroup
	defer wg.Wait()
	for n := 0; n < want; {
		var b *consumer.Batch
		select {
		case b = <-c.Batches():
		case <-ctx.Done():
			return got
		}
		for _, r := range b.Records {
			got[b.Shard] = append(got[b.Shard], string(r.Data[:len(fmt.Sprintf("%s/%d", b.Shard, 1))+6]))
		}
		n += len(b.Records)
		if delivered != nil {
			delivered(b.Shard, got)
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			time.Sleep(hold)
			api.acked.Add(int64(len(b.Records) * api.size))
			b.Ack(nil)
		}()
	}
	return got
}

func largeBacklog(shards, records, size int) *largeAnswers {
	api := &largeAnswers{Kinesis: consumertest.NewKinesis(), size: size}
	for i := range shards {
		api.Add(fmt.Sprintf("shardId-%012d", i), &consumertest.KinesisShard{Records: records})
	}
	return api
}

// The bytes the input holds (answered by Kinesis, not yet acked) never
// exceed max_buffered_bytes plus one answer, whatever the shard count:
// before the budget, every shard held a whole answer of its own (here 16
// answers of 10 MiB for a budget of 8 MiB).
func TestBudgetBoundsWhatShardsHold(t *testing.T) {
	for _, parallel := range []int{1, 4} {
		t.Run(fmt.Sprintf("shard_parallelism=%d", parallel), func(t *testing.T) {
			t.Parallel()
			const shards, records, size = 16, 60, 256 << 10
			api := largeBacklog(shards, records, size)
			cfg := testConfig()
			cfg.Limit = 100
			cfg.ShardParallelism = parallel
			cfg.MaxBufferedBytes = 8 << 20
			c := startConsumer(t, cfg, api, consumertest.NewStore(time.Minute))
			ctx, cancel := context.WithTimeout(t.Context(), 60*time.Second)
			defer cancel()

			got := slowPipeline(ctx, c, api, shards*records, 5*time.Millisecond, nil)
			total := 0
			for _, recs := range got {
				total += len(recs)
			}
			require.Equal(t, shards*records, total, "every record arrives")
			bound := cfg.MaxBufferedBytes + api.largest.Load()
			assert.LessOrEqual(t, api.peak.Load(), bound, "peak held %d MiB, budget %d MiB plus one answer of %d MiB", api.peak.Load()>>20, cfg.MaxBufferedBytes>>20, api.largest.Load()>>20)
			assert.LessOrEqual(t, c.budget.PeakHeld(), cfg.MaxBufferedBytes+budget.WhileReading(api.largest.Load()+records*budget.RecordOverhead), "the budget's own count")
			// Readers at the tip still fetch (each holding room for its call
			// under way); once they end, every byte is given back.
			require.NoError(t, c.Close(ctx))
			held, waiting, _ := c.budget.State()
			assert.Zero(t, waiting)
			assert.Equal(t, int64(0), held, "every byte is given back")
		})
	}
}

// No shard starves: with a budget far below the backlog (32 shards of
// 5 MiB, a budget of 2 MiB, so shards take turns), shards are served in
// turn. The bound: between two batches of one shard, no other shard
// delivers more than three batches (with first come, first served, one
// in its hands and one queued ahead, plus one for the pace).
func TestBudgetServesShardsInTurn(t *testing.T) {
	t.Parallel()
	const shards, records, size = 32, 12, 256 << 10
	api := largeBacklog(shards, records, size)
	cfg := testConfig()
	cfg.Limit = 100
	cfg.MaxBufferedBytes = 2 << 20
	c := startConsumer(t, cfg, api, consumertest.NewStore(time.Minute))
	ctx, cancel := context.WithTimeout(t.Context(), 120*time.Second)
	defer cancel()

	// since[x][y] counts the batches of y since x's last batch, while x
	// has records left.
	since := map[string]map[string]int{}
	for i := range shards {
		since[fmt.Sprintf("shardId-%012d", i)] = map[string]int{} // every shard waits from the start
	}
	worst, worstPair := 0, ""
	turns := func(shard string, got map[string][]string) {
		for x, counts := range since {
			if x == shard || len(got[x]) == records {
				continue
			}
			counts[shard]++
			if counts[shard] > worst {
				worst, worstPair = counts[shard], shard+" while "+x+" waited"
			}
		}
		since[shard] = map[string]int{}
	}
	// Each batch is held long enough that a round of all shards takes
	// longer than their pace: shards always wait for the budget, not for
	// poll_interval, so the order they are let in is the budget's.
	got := slowPipeline(ctx, c, api, shards*records, 25*time.Millisecond, turns)
	for i := range shards {
		assert.Len(t, got[fmt.Sprintf("shardId-%012d", i)], records)
	}
	assert.LessOrEqual(t, worst, 3, "%s delivered %d batches", worstPair, worst)
}

// An answer larger than the whole budget still goes ahead, alone: with a
// budget smaller than one record, records arrive one answer at a time.
func TestBudgetLetsAnOversizedAnswerThroughAlone(t *testing.T) {
	t.Parallel()
	const shards, records, size = 4, 10, 256 << 10
	api := largeBacklog(shards, records, size)
	cfg := testConfig()
	cfg.MaxBufferedBytes = 64 << 10
	c := startConsumer(t, cfg, api, consumertest.NewStore(time.Minute))
	ctx, cancel := context.WithTimeout(t.Context(), 60*time.Second)
	defer cancel()
	got := slowPipeline(ctx, c, api, shards*records, time.Millisecond, nil)
	for i := range shards {
		assert.Len(t, got[fmt.Sprintf("shardId-%012d", i)], records)
	}
	assert.LessOrEqual(t, api.peak.Load(), api.largest.Load(), "one answer at a time")
}
