package consumer

import (
	"context"
	"fmt"
	"log/slog"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/kinesis"
	"github.com/aws/aws-sdk-go-v2/service/kinesis/types"
	"github.com/redpanda-data/benthos/v4/public/service"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// largeAnswers serves fakeKinesis's records padded to size bytes, at most
// maxAnswerBytes of data per answer as Kinesis does, and follows the bytes
// the input holds from outside the budget: data answered by GetRecords
// minus data the test acked.
type largeAnswers struct {
	*fakeKinesis
	size     int
	answered atomic.Int64
	acked    atomic.Int64
	peak     atomic.Int64
	// largest is the largest answer, in data bytes.
	largest atomic.Int64
}

func (l *largeAnswers) GetRecords(ctx context.Context, in *kinesis.GetRecordsInput, opts ...func(*kinesis.Options)) (*kinesis.GetRecordsOutput, error) {
	cp := *in
	cp.Limit = aws.Int32(min(aws.ToInt32(in.Limit), int32(maxAnswerBytes/l.size)))
	out, err := l.fakeKinesis.GetRecords(ctx, &cp, opts...)
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
		var b *Batch
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
	api := &largeAnswers{fakeKinesis: newFakeKinesis(), size: size}
	for i := range shards {
		api.add(fmt.Sprintf("shardId-%012d", i), &fakeShard{records: records})
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
			c := startConsumer(t, cfg, api, newFakeStore(time.Minute))
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
			assert.LessOrEqual(t, c.budget.peakHeld(), cfg.MaxBufferedBytes+whileReading(api.largest.Load()+records*recordOverhead), "the budget's own count")
			// Readers at the tip still fetch (each holding room for its call
			// under way); once they end, every byte is given back.
			require.NoError(t, c.Close(ctx))
			held, waiting, _ := c.budget.state()
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
	c := startConsumer(t, cfg, api, newFakeStore(time.Minute))
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
	c := startConsumer(t, cfg, api, newFakeStore(time.Minute))
	ctx, cancel := context.WithTimeout(t.Context(), 60*time.Second)
	defer cancel()
	got := slowPipeline(ctx, c, api, shards*records, time.Millisecond, nil)
	for i := range shards {
		assert.Len(t, got[fmt.Sprintf("shardId-%012d", i)], records)
	}
	assert.LessOrEqual(t, api.peak.Load(), api.largest.Load(), "one answer at a time")
}

// The budget's warning comes once per episode, not once per waiting shard
// or per check: two shards wait past the threshold and one WARN is logged;
// once none waited for the episode gap, a new wait warns again.
func TestBudgetWarnsOncePerEpisode(t *testing.T) {
	t.Parallel()
	var logs syncBuffer
	b := newBudget(100, newMetrics(nil))
	c := &Consumer{budget: b, log: service.NewLoggerFromSlog(slog.New(slog.NewTextHandler(&logs, nil)))}
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	go c.watchBudget(ctx, 100*time.Millisecond, 300*time.Millisecond, 10*time.Millisecond)
	const warning = "level=WARN msg=\"The input's byte budget"

	b.charge(100)
	w1, w2 := b.enqueue(50, 50), b.enqueue(50, 50)
	assert.Eventually(t, func() bool { return logs.count(warning) == 1 }, 5*time.Second, 10*time.Millisecond)
	time.Sleep(200 * time.Millisecond) // many more checks, both shards still waiting
	assert.Equal(t, 1, logs.count(warning), "one warning for the episode")

	b.giveBack(100)
	<-w1.ready
	<-w2.ready
	assert.Eventually(t, func() bool { return logs.count("no longer holds shards back") == 1 }, 5*time.Second, 10*time.Millisecond)

	b.enqueue(50, 50) // the budget is full again (w1 and w2 hold it)
	assert.Eventually(t, func() bool { return logs.count(warning) == 2 }, 5*time.Second, 10*time.Millisecond, "a new episode warns again")
}

// What a shard asks for and the Limit it then uses: the largest answer
// before it knows its records, `limit` records when that room is granted,
// fewer large records when only part of it is free, the largest answer at
// its record size while behind, little (and the full `limit`) after an
// empty answer at the tip, and little for a quiet subscription.
func TestShardBudgetAsksAndLimits(t *testing.T) {
	const limit = 10000
	ctx := t.Context()
	b := newBudget(1<<30, newMetrics(nil))
	s := newShardBudget(b, limit, false)
	require.NoError(t, s.reserve(ctx))
	assert.Equal(t, whileReading(maxAnswerBytes+limit*recordOverhead), s.reserved, "room for the largest answer first")
	assert.Equal(t, int32(limit), s.callLimit(), "which holds any answer")

	big := []Record{{Data: make([]byte, 900_000), PartitionKey: "k", Sequence: "1"}}
	raw := []types.Record{{Data: big[0].Data, PartitionKey: aws.String("k"), SequenceNumber: aws.String("1")}}
	s.settle(big, raw, 5000)
	held, _, _ := b.state()
	rec := recordsCost(big)
	assert.Equal(t, rec, held, "charged at its cost")

	// Behind, it asks for the largest answer of such records (11 fit in
	// 10 MiB); with only 2 MiB free it gets those and asks for one record.
	b.charge(1<<30 - 2<<20 - held)
	require.NoError(t, s.reserve(ctx))
	assert.Equal(t, int64(2<<20), s.reserved, "what is free")
	assert.Equal(t, int32(1), s.callLimit())
	s.giveBack()

	// With room, all of it, and any answer fits.
	b.giveBack(1<<30 - 2<<20 - held)
	require.NoError(t, s.reserve(ctx))
	assert.Equal(t, whileReading(11*rec), s.reserved)
	assert.Equal(t, int32(limit), s.callLimit())

	// An empty answer at the tip: little room, the full limit.
	s.settle(nil, nil, 0)
	require.NoError(t, s.reserve(ctx))
	assert.Equal(t, whileReading(max(rec, minAnswerBytes)), s.reserved)
	assert.Equal(t, int32(limit), s.callLimit(), "a burst is read in one call")
	s.close()

	sub := newShardBudget(newBudget(1<<30, newMetrics(nil)), limit, true)
	require.NoError(t, sub.reserve(ctx))
	assert.Equal(t, whileReading(minEventBytes), sub.reserved, "a quiet subscription holds little")
	sub.close()
}

// No shard asks for more than half the budget, so one never holds all of
// it while others wait; a record larger than that still goes ahead.
func TestShardBudgetAsksHalfTheBudgetAtMost(t *testing.T) {
	b := newBudget(4<<20, newMetrics(nil))
	s := newShardBudget(b, 10000, false)
	require.NoError(t, s.reserve(t.Context()))
	assert.Equal(t, int64(2<<20), s.reserved)
	s.close()
}
