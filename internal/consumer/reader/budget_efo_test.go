package reader

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/service/kinesis"
	"github.com/aws/aws-sdk-go-v2/service/kinesis/types"
	"github.com/redpanda-data/benthos/v4/public/service"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/connect-kinesis/connect-kinesis/internal/consumer"
	"github.com/connect-kinesis/connect-kinesis/internal/consumer/budget"
	"github.com/connect-kinesis/connect-kinesis/internal/consumer/consumertest"
	"github.com/connect-kinesis/connect-kinesis/internal/consumer/source"
	"github.com/connect-kinesis/connect-kinesis/internal/kinesisx"
)

// The budget bounds enhanced fan-out too: subscriptions whose next event
// does not fit wait by not reading their event streams. Three shards push
// events of 256 KiB (each asks room for twice that) into a budget of
// 2 MiB, with shard_max_in_flight high enough that only the budget holds
// them back. While the pipeline holds its acks, every shard waits in the
// budget's queue, takes no event from its stream (which still has events),
// and keeps its subscription; past the subscription's pause limit the
// source drops it, and once acks come again it subscribes right after the
// last record it handed over: every record arrives once, in order. The
// data held (pushed minus acked) never exceeds the budget plus one event.
func TestBudgetHoldsBackFanOutSubscriptions(t *testing.T) {
	t.Parallel()
	const shards, records, perEvent, size = 3, 32, 2, 128 << 10
	const capacity = 2 << 20
	ctx, cancel := context.WithTimeout(t.Context(), 60*time.Second)
	defer cancel()

	api := &consumertest.EFOBacklog{Records: records, PerEvent: perEvent, Size: size, Shards: map[string]*consumertest.EFOShard{}}
	const pausedAfter = time.Second // the source's pausedLimit, shortened
	st, out, ids := efoBudgetStream(t, ctx, api, shards, capacity, pausedAfter)
	var readers sync.WaitGroup
	for _, id := range ids {
		start := source.Start{IterType: types.ShardIteratorTypeTrimHorizon}
		r := New(st, consumer.Shard{ID: id}, consumer.Lease{Shard: id, Owner: "me", Token: 1}, start)
		require.True(t, r.budget.Push(), "the reader reads a subscription")
		readers.Go(func() {
			defer r.budget.Close()
			r.read()
		})
	}
	p := &consumertest.Pausable{API: api, Hold: 20 * time.Millisecond, Got: map[string][]string{}}
	go p.Run(ctx, out)

	// Reading at the pipeline's pace, every shard's event size known.
	require.Eventually(t, func() bool { e, _ := p.Delivered(); return e >= 3*shards }, 20*time.Second, 5*time.Millisecond)

	// The pipeline holds its acks: the budget fills and every shard waits
	// for it, its stream unread.
	p.Pause(true)
	allWait := assert.Eventually(t, func() bool { _, w, _ := st.Budget.State(); return w == shards }, 5*time.Second, 5*time.Millisecond,
		"every shard waits for the budget")
	events, subs := api.Reads()
	time.Sleep(pausedAfter / 2)
	events2, subs2 := api.Reads()
	assert.Equal(t, events, events2, "events taken while the shards wait for the budget")
	assert.Equal(t, subs, subs2, "subscriptions while the shards wait less than the pause limit")
	for _, id := range ids {
		assert.Less(t, events2[id], records/perEvent, "%s: its stream still has events", id)
	}

	// Waiting past the pause limit, each subscription is dropped...
	if allWait {
		assert.Eventually(t, func() bool {
			api.Mu.Lock()
			defer api.Mu.Unlock()
			for _, id := range ids {
				if api.Shards[id].Closed == 0 {
					return false
				}
			}
			return true
		}, 5*time.Second, 10*time.Millisecond, "the unread subscriptions are dropped")
		events3, _ := api.Reads()
		assert.Equal(t, events, events3, "events taken while the shards wait for the budget")
	}
	// ...and once acks come again, renewed after the last record handed over.
	p.Pause(false)
	if !assert.Eventually(t, func() bool { _, n := p.Delivered(); return n >= shards*records }, 30*time.Second, 10*time.Millisecond, "every record arrives") {
		held, waiting, _ := st.Budget.State()
		api.Mu.Lock()
		for _, id := range ids {
			sh := api.Shards[id]
			t.Logf("%s: read %d events, last %s, starts %v, closed %d", id, sh.Read, sh.LastSeq, sh.Starts, sh.Closed)
		}
		api.Mu.Unlock()
		p.Mu.Lock()
		for _, id := range ids {
			t.Logf("%s: delivered %d", id, len(p.Got[id]))
		}
		t.Logf("budget held %d waiting %d; waiting acks %d", held, waiting, len(p.Waiting))
		p.Mu.Unlock()
		t.FailNow()
	}

	cancel()
	readers.Wait()
	// A batch in the pipeline as the readers ended stays charged until
	// its ack.
	assert.Eventually(t, func() bool { held, _, _ := st.Budget.State(); return held == 0 }, 5*time.Second, 10*time.Millisecond, "every byte is given back")
	p.Mu.Lock()
	defer p.Mu.Unlock()
	api.Mu.Lock()
	defer api.Mu.Unlock()
	for _, id := range ids {
		var want []string
		for i := 1; i <= records; i++ {
			want = append(want, consumertest.SeqOf(id, i))
		}
		assert.Equal(t, want, p.Got[id], "%s: every record once, in order", id)
		assert.Empty(t, api.Shards[id].Wrong, "%s: subscriptions %v", id, api.Shards[id].Starts)
		assert.GreaterOrEqual(t, len(api.Shards[id].Starts), 2, "%s subscribed again after the wait: %v", id, api.Shards[id].Starts)
	}
	bound := int64(capacity + perEvent*size)
	t.Logf("peak held %d KiB (bound %d KiB); subscriptions of %s: %v", api.Peak.Load()>>10, bound>>10, ids[0], api.Shards[ids[0]].Starts)
	assert.LessOrEqual(t, api.Peak.Load(), bound, "peak held %d KiB, budget %d KiB plus one event of %d KiB", api.Peak.Load()>>10, capacity>>10, perEvent*size>>10)
	_, waiting, _ := st.Budget.State()
	assert.Zero(t, waiting)
}

// Subscriptions that open behind the tip catch up within the budget: each
// asks for a full event before its first one, not for the little a quiet
// subscription needs, so they are let in a few at a time. Eight shards
// each push a backlog in events of 1,000 small records (about 1.1 MB of
// budget each, 100 bytes of data a record) into a budget of 2 MiB, with a
// pipeline that takes half a second to ack each batch. The budget never
// holds more than itself plus one event; when every new subscription
// asked for twice its last event (64 KiB at first), all eight took their
// first event at once.
func TestBudgetHoldsBackFanOutCatchUp(t *testing.T) {
	t.Parallel()
	const shards, records, perEvent, size = 8, 2000, 1000, 100
	const capacity = 2 << 20
	ctx, cancel := context.WithTimeout(t.Context(), 60*time.Second)
	defer cancel()

	api := &consumertest.EFOBacklog{Records: records, PerEvent: perEvent, Size: size, Shards: map[string]*consumertest.EFOShard{}}
	st, out, ids := efoBudgetStream(t, ctx, api, shards, capacity, 0)
	var readers sync.WaitGroup
	for _, id := range ids {
		r := New(st, consumer.Shard{ID: id}, consumer.Lease{Shard: id, Owner: "me", Token: 1}, source.Start{IterType: types.ShardIteratorTypeTrimHorizon})
		readers.Go(func() {
			defer r.budget.Close()
			r.read()
		})
	}
	p := &consumertest.Pausable{API: api, Hold: 500 * time.Millisecond, Got: map[string][]string{}}
	go p.Run(ctx, out)

	require.Eventually(t, func() bool { _, n := p.Delivered(); return n >= shards*records }, 45*time.Second, 10*time.Millisecond, "every record arrives")
	cancel()
	readers.Wait()

	longest := len(consumertest.SeqOf(ids[shards-1], records))
	one := int64(perEvent * (size + len("k") + longest + budget.RecordOverhead))
	peak := st.Budget.PeakHeld()
	t.Logf("peak held %d KiB; budget %d KiB, one event %d KiB", peak>>10, capacity>>10, one>>10)
	assert.LessOrEqual(t, peak, int64(capacity)+one, "the budget plus one event at most")
	p.Mu.Lock()
	defer p.Mu.Unlock()
	for _, id := range ids {
		assert.Len(t, p.Got[id], records, "%s: every record once", id)
	}
}

// efoBudgetStream is a stream of shards read by subscriptions of api,
// with a byte budget of capacity and shard_max_in_flight high enough that
// only the budget holds shards back; pausedAfter shortens the source's
// pausedLimit when set. It returns the stream, its pipeline's channel and
// the shard IDs.
func efoBudgetStream(t *testing.T, ctx context.Context, api *consumertest.EFOBacklog, shards int, capacity int64, pausedAfter time.Duration) (*Stream, chan *consumer.Batch, []string) {
	t.Helper()
	kin := consumertest.NewKinesis()
	var ids []string
	for i := range shards {
		id := fmt.Sprintf("shardId-%012d", i)
		ids = append(ids, id)
		api.Shards[id] = &consumertest.EFOShard{}
		// For the source's end-of-shard check at the tip: open shards.
		kin.Add(id, &consumertest.KinesisShard{Records: api.Records})
	}
	cfg := consumertest.Config()
	cfg.ShardMaxInFlight = 100 // only the budget holds shards back
	bo := kinesisx.Backoff{InitialInterval: 10 * time.Millisecond, MaxInterval: 20 * time.Millisecond}
	sc := source.NewStreamConsumer(consumertest.NewConsumers(consumertest.ConsumerARN), consumertest.StreamARN, consumer.EnhancedFanOut{Enabled: true, ConsumerName: "c"}, bo, nil)
	_, err := sc.Resolve(ctx)
	require.NoError(t, err)
	out := make(chan *consumer.Batch)
	st := testStream(ctx, &cfg, kin, consumertest.NewStore(time.Minute), out)
	st.Budget = budget.New(capacity, st.Metrics)
	st.Push = true
	st.OpenSource = func(shard string, from source.Start, log *service.Logger, room source.Room) source.RecordSource {
		sub := api.Subscribe(shard)
		return source.NewSubscription(source.Params{API: kin, Stream: "s", Shard: shard, From: from, Config: &cfg, Log: log, Room: room, PausedAfter: pausedAfter}, sc,
			func(ctx context.Context, in *kinesis.SubscribeToShardInput) (source.EventStream, error) {
				return sub(ctx, in)
			})
	}
	return st, out, ids
}
