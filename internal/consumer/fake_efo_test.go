package consumer

import (
	"context"
	"fmt"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/kinesis"
	"github.com/aws/aws-sdk-go-v2/service/kinesis/types"
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
