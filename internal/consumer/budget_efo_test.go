package consumer

import (
	"context"
	"fmt"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/kinesis"
	"github.com/aws/aws-sdk-go-v2/service/kinesis/types"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/connect-kinesis/connect-kinesis/internal/kinesisx"
)

// efoBacklog serves enhanced fan-out subscriptions of shards with a
// backlog: records 1..records of size bytes, perEvent to an event. An event
// is pushed only when the source takes it (an unbuffered channel: the SDK's
// reader blocks the connection the same way), so a reader that does not
// read its stream leaves it undrained. It follows what the input holds
// from outside the budget (data pushed minus data acked), and checks that
// every subscription after the first starts right after the last record
// the shard's earlier ones pushed.
type efoBacklog struct {
	records, perEvent, size int

	answered, acked, peak atomic.Int64

	mu     sync.Mutex
	shards map[string]*efoShard
}

type efoShard struct {
	read    int    // events with records taken, over every subscription
	lastSeq string // the last record pushed
	starts  []string
	wrong   []string // starts that were not right after lastSeq
	closed  int      // subscriptions closed by the source
}

// efoEvents is one subscription of efoBacklog.
type efoEvents struct {
	ch     chan types.SubscribeToShardEventStream
	closed chan struct{}
	once   sync.Once
}

func (e *efoEvents) Events() <-chan types.SubscribeToShardEventStream { return e.ch }
func (e *efoEvents) Err() error                                       { return nil }
func (e *efoEvents) Close() error {
	e.once.Do(func() { close(e.closed) })
	return nil
}

func (f *efoBacklog) subscribe(shard string) subscribeFunc {
	return func(_ context.Context, in *kinesis.SubscribeToShardInput) (eventStream, error) {
		f.mu.Lock()
		defer f.mu.Unlock()
		sh := f.shards[shard]
		pos := in.StartingPosition
		start := string(pos.Type) + " " + aws.ToString(pos.SequenceNumber)
		want := "TRIM_HORIZON "
		if sh.lastSeq != "" {
			want = "AFTER_SEQUENCE_NUMBER " + sh.lastSeq
		}
		sh.starts = append(sh.starts, start)
		if start != want {
			sh.wrong = append(sh.wrong, fmt.Sprintf("started at %q, want %q", start, want))
		}
		from := 1
		if pos.Type == types.ShardIteratorTypeAfterSequenceNumber {
			n, _ := strconv.Atoi(aws.ToString(pos.SequenceNumber))
			from = n%1000000 + 1
		}
		es := &efoEvents{ch: make(chan types.SubscribeToShardEventStream), closed: make(chan struct{})}
		go f.push(shard, from, es)
		return es, nil
	}
}

// push offers the shard's events from record from on, one at a time, until
// the subscription is closed; at the tip it is silent.
func (f *efoBacklog) push(shard string, from int, es *efoEvents) {
	defer close(es.ch) // as the SDK's stream does once closed
	for i := from; i <= f.records; i += f.perEvent {
		e := types.SubscribeToShardEvent{MillisBehindLatest: aws.Int64(1000)}
		for j := i; j < min(i+f.perEvent, f.records+1); j++ {
			data := make([]byte, f.size)
			copy(data, fmt.Sprintf("%s/%d", shard, j))
			e.Records = append(e.Records, types.Record{SequenceNumber: aws.String(seqOf(shard, j)), PartitionKey: aws.String("k"), Data: data})
		}
		e.ContinuationSequenceNumber = e.Records[len(e.Records)-1].SequenceNumber
		select {
		case es.ch <- &types.SubscribeToShardEventStreamMemberSubscribeToShardEvent{Value: e}:
		case <-es.closed:
			f.noteClosed(shard)
			return
		}
		held := f.answered.Add(int64(len(e.Records)*f.size)) - f.acked.Load()
		for p := f.peak.Load(); held > p && !f.peak.CompareAndSwap(p, held); p = f.peak.Load() {
		}
		f.mu.Lock()
		f.shards[shard].read++
		f.shards[shard].lastSeq = aws.ToString(e.ContinuationSequenceNumber)
		f.mu.Unlock()
	}
	// At the tip, an empty event every tipEvery, as Kinesis sends one
	// every few seconds while nothing is written.
	last := seqOf(shard, max(from-1, f.records))
	for {
		tick := time.NewTimer(tipEvery)
		select {
		case <-tick.C:
		case <-es.closed:
			tick.Stop()
			f.noteClosed(shard)
			return
		}
		e := types.SubscribeToShardEvent{MillisBehindLatest: aws.Int64(0), ContinuationSequenceNumber: aws.String(last)}
		select {
		case es.ch <- &types.SubscribeToShardEventStreamMemberSubscribeToShardEvent{Value: e}:
		case <-es.closed:
			f.noteClosed(shard)
			return
		}
	}
}

// tipEvery is how often a subscription at the tip gets an empty event
// (Kinesis: at least every few seconds; shorter here).
const tipEvery = 100 * time.Millisecond

func (f *efoBacklog) noteClosed(shard string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.shards[shard].closed++
}

// reads is every shard's count of events taken and of subscriptions.
func (f *efoBacklog) reads() (events map[string]int, subs map[string]int) {
	f.mu.Lock()
	defer f.mu.Unlock()
	events, subs = map[string]int{}, map[string]int{}
	for id, sh := range f.shards {
		events[id], subs[id] = sh.read, len(sh.starts)
	}
	return events, subs
}

// pausable is a slow pipeline: it takes every batch at once, notes its
// records and acks it after hold, unless paused: then the acks wait for
// resume.
type pausable struct {
	api  *efoBacklog
	hold time.Duration

	mu      sync.Mutex
	paused  bool
	waiting []*Batch
	acking  atomic.Int64        // acks under way
	got     map[string][]string // record sequence numbers by shard, in arrival order
	events  int
}

func (p *pausable) run(ctx context.Context, out <-chan *Batch) {
	for {
		select {
		case b := <-out:
			p.mu.Lock()
			for _, r := range b.Records {
				p.got[b.Shard] = append(p.got[b.Shard], r.Sequence)
			}
			p.events++
			p.mu.Unlock()
			time.AfterFunc(p.hold, func() { p.ack(b) })
		case <-ctx.Done():
			return
		}
	}
}

func (p *pausable) ack(b *Batch) {
	p.mu.Lock()
	if p.paused {
		p.waiting = append(p.waiting, b)
		p.mu.Unlock()
		return
	}
	p.acking.Add(1)
	p.mu.Unlock()
	p.api.acked.Add(int64(len(b.Records) * p.api.size))
	b.Ack(nil)
	p.acking.Add(-1)
}

// pause holds the acks from now on (on) or acks what it held; paused, it
// returns once no ack decided before is still under way.
func (p *pausable) pause(on bool) {
	p.mu.Lock()
	p.paused = on
	w := p.waiting
	p.waiting = nil
	p.mu.Unlock()
	for _, b := range w {
		p.ack(b)
	}
	for on && p.acking.Load() > 0 {
		time.Sleep(time.Millisecond)
	}
}

func (p *pausable) delivered() (events, records int) {
	p.mu.Lock()
	defer p.mu.Unlock()
	for _, g := range p.got {
		records += len(g)
	}
	return p.events, records
}

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

	api := &efoBacklog{records: records, perEvent: perEvent, size: size, shards: map[string]*efoShard{}}
	var ids []string
	for i := range shards {
		id := fmt.Sprintf("shardId-%012d", i)
		ids = append(ids, id)
		api.shards[id] = &efoShard{}
	}
	co := balancingCoordinator(newFakeStore(time.Minute), "me", ids)
	co.runCtx = ctx
	for _, id := range ids {
		// For the source's end-of-shard check at the tip: open shards.
		co.api.(*fakeKinesis).add(id, &fakeShard{records: records})
	}
	co.c.cfg.ShardMaxInFlight = 100 // only the budget holds shards back
	co.c.out = make(chan *Batch)
	co.c.budget = newBudget(capacity, co.c.metrics)
	bo := kinesisx.Backoff{InitialInterval: 10 * time.Millisecond, MaxInterval: 20 * time.Millisecond}
	co.fanOut = newStreamConsumer(newFakeConsumers(testConsumerARN), fakeStreamARN, EnhancedFanOut{Enabled: true, ConsumerName: "c"}, bo, nil)
	co.fanOut.arn, co.fanOut.stale = testConsumerARN, false

	const pausedAfter = time.Second // the source's pausedLimit, shortened
	var readers sync.WaitGroup
	for _, id := range ids {
		start := startSpec{iterType: types.ShardIteratorTypeTrimHorizon}
		r := newShardReader(co, co.listed[id], Lease{Shard: id, Owner: "me", Token: 1}, start)
		require.True(t, r.budget.push, "the reader reads a subscription")
		r.openSource = func() RecordSource {
			s := newSubscriptionSource(co, api.subscribe(id), id, start, r.log)
			s.pausedAfter = pausedAfter
			return s
		}
		co.readers[id] = r
		readers.Go(func() {
			defer r.budget.close()
			r.read()
		})
	}
	p := &pausable{api: api, hold: 20 * time.Millisecond, got: map[string][]string{}}
	go p.run(ctx, co.c.out)

	// Reading at the pipeline's pace, every shard's event size known.
	require.Eventually(t, func() bool { e, _ := p.delivered(); return e >= 3*shards }, 20*time.Second, 5*time.Millisecond)

	// The pipeline holds its acks: the budget fills and every shard waits
	// for it, its stream unread.
	p.pause(true)
	allWait := assert.Eventually(t, func() bool { _, w, _ := co.c.budget.state(); return w == shards }, 5*time.Second, 5*time.Millisecond,
		"every shard waits for the budget")
	events, subs := api.reads()
	time.Sleep(pausedAfter / 2)
	events2, subs2 := api.reads()
	assert.Equal(t, events, events2, "events taken while the shards wait for the budget")
	assert.Equal(t, subs, subs2, "subscriptions while the shards wait less than the pause limit")
	for _, id := range ids {
		assert.Less(t, events2[id], records/perEvent, "%s: its stream still has events", id)
	}

	// Waiting past the pause limit, each subscription is dropped...
	if allWait {
		assert.Eventually(t, func() bool {
			api.mu.Lock()
			defer api.mu.Unlock()
			for _, id := range ids {
				if api.shards[id].closed == 0 {
					return false
				}
			}
			return true
		}, 5*time.Second, 10*time.Millisecond, "the unread subscriptions are dropped")
		events3, _ := api.reads()
		assert.Equal(t, events, events3, "events taken while the shards wait for the budget")
	}
	// ...and once acks come again, renewed after the last record handed over.
	p.pause(false)
	if !assert.Eventually(t, func() bool { _, n := p.delivered(); return n >= shards*records }, 30*time.Second, 10*time.Millisecond, "every record arrives") {
		held, waiting, _ := co.c.budget.state()
		api.mu.Lock()
		for _, id := range ids {
			sh := api.shards[id]
			t.Logf("%s: read %d events, last %s, starts %v, closed %d", id, sh.read, sh.lastSeq, sh.starts, sh.closed)
		}
		api.mu.Unlock()
		p.mu.Lock()
		for _, id := range ids {
			t.Logf("%s: delivered %d", id, len(p.got[id]))
		}
		t.Logf("budget held %d waiting %d; waiting acks %d", held, waiting, len(p.waiting))
		p.mu.Unlock()
		t.FailNow()
	}

	cancel()
	readers.Wait()
	p.mu.Lock()
	defer p.mu.Unlock()
	api.mu.Lock()
	defer api.mu.Unlock()
	for _, id := range ids {
		var want []string
		for i := 1; i <= records; i++ {
			want = append(want, seqOf(id, i))
		}
		assert.Equal(t, want, p.got[id], "%s: every record once, in order", id)
		assert.Empty(t, api.shards[id].wrong, "%s: subscriptions %v", id, api.shards[id].starts)
		assert.GreaterOrEqual(t, len(api.shards[id].starts), 2, "%s subscribed again after the wait: %v", id, api.shards[id].starts)
	}
	bound := int64(capacity + perEvent*size)
	t.Logf("peak held %d KiB (bound %d KiB); subscriptions of %s: %v", api.peak.Load()>>10, bound>>10, ids[0], api.shards[ids[0]].starts)
	assert.LessOrEqual(t, api.peak.Load(), bound, "peak held %d KiB, budget %d KiB plus one event of %d KiB", api.peak.Load()>>10, capacity>>10, perEvent*size>>10)
	held, waiting, _ := co.c.budget.state()
	assert.Zero(t, waiting)
	assert.Equal(t, int64(0), held, "every byte is given back")
}
