package consumertest

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
	"github.com/connect-kinesis/connect-kinesis/internal/consumer"
)

// EFOBacklog serves enhanced fan-out subscriptions of shards with a
// backlog: records 1..records of size bytes, perEvent to an event. An event
// is pushed only when the source takes it (an unbuffered channel: the SDK's
// reader blocks the connection the same way), so a reader that does not
// Read its stream leaves it undrained. It follows what the input holds
// from outside the budget (data pushed minus data acked), and checks that
// every subscription after the first starts right after the last record
// the shard's earlier ones pushed.
type EFOBacklog struct {
	Records, PerEvent, Size int

	Answered, Acked, Peak atomic.Int64

	Mu     sync.Mutex
	Shards map[string]*EFOShard
}

type EFOShard struct {
	Read    int    // events with records taken, over every subscription
	LastSeq string // the last record pushed
	Starts  []string
	Wrong   []string // starts that were not right after lastSeq
	Closed  int      // subscriptions closed by the source
}

// EFOEvents is one subscription of efoBacklog.
type EFOEvents struct {
	Ch     chan types.SubscribeToShardEventStream
	Closed chan struct{}
	once   sync.Once
}

func (e *EFOEvents) Events() <-chan types.SubscribeToShardEventStream { return e.Ch }
func (e *EFOEvents) Err() error                                       { return nil }
func (e *EFOEvents) Close() error {
	e.once.Do(func() { close(e.Closed) })
	return nil
}

// Subscribe opens a subscription of shard, as SubscribeToShard would, and
// checks where it starts.
func (f *EFOBacklog) Subscribe(shard string) func(context.Context, *kinesis.SubscribeToShardInput) (*EFOEvents, error) {
	return func(_ context.Context, in *kinesis.SubscribeToShardInput) (*EFOEvents, error) {
		f.Mu.Lock()
		defer f.Mu.Unlock()
		sh := f.Shards[shard]
		pos := in.StartingPosition
		start := string(pos.Type) + " " + aws.ToString(pos.SequenceNumber)
		want := "TRIM_HORIZON "
		if sh.LastSeq != "" {
			want = "AFTER_SEQUENCE_NUMBER " + sh.LastSeq
		}
		sh.Starts = append(sh.Starts, start)
		if start != want {
			sh.Wrong = append(sh.Wrong, fmt.Sprintf("started at %q, want %q", start, want))
		}
		from := 1
		if pos.Type == types.ShardIteratorTypeAfterSequenceNumber {
			n, _ := strconv.Atoi(aws.ToString(pos.SequenceNumber))
			from = n%1000000 + 1
		}
		es := &EFOEvents{Ch: make(chan types.SubscribeToShardEventStream), Closed: make(chan struct{})}
		go f.Push(shard, from, es)
		return es, nil
	}
}

// Push offers the shard's events from record from on, one at a time, until
// the subscription is closed; at the tip it is silent.
func (f *EFOBacklog) Push(shard string, from int, es *EFOEvents) {
	defer close(es.Ch) // as the SDK's stream does once closed
	for i := from; i <= f.Records; i += f.PerEvent {
		e := types.SubscribeToShardEvent{MillisBehindLatest: aws.Int64(1000)}
		for j := i; j < min(i+f.PerEvent, f.Records+1); j++ {
			data := make([]byte, f.Size)
			copy(data, fmt.Sprintf("%s/%d", shard, j))
			e.Records = append(e.Records, types.Record{SequenceNumber: aws.String(SeqOf(shard, j)), PartitionKey: aws.String("k"), Data: data})
		}
		e.ContinuationSequenceNumber = e.Records[len(e.Records)-1].SequenceNumber
		select {
		case es.Ch <- &types.SubscribeToShardEventStreamMemberSubscribeToShardEvent{Value: e}:
		case <-es.Closed:
			f.NoteClosed(shard)
			return
		}
		held := f.Answered.Add(int64(len(e.Records)*f.Size)) - f.Acked.Load()
		for p := f.Peak.Load(); held > p && !f.Peak.CompareAndSwap(p, held); p = f.Peak.Load() {
		}
		f.Mu.Lock()
		f.Shards[shard].Read++
		f.Shards[shard].LastSeq = aws.ToString(e.ContinuationSequenceNumber)
		f.Mu.Unlock()
	}
	// At the tip, an empty event every tipEvery, as Kinesis sends one
	// every few seconds while nothing is written.
	last := SeqOf(shard, max(from-1, f.Records))
	for {
		tick := time.NewTimer(TipEvery)
		select {
		case <-tick.C:
		case <-es.Closed:
			tick.Stop()
			f.NoteClosed(shard)
			return
		}
		e := types.SubscribeToShardEvent{MillisBehindLatest: aws.Int64(0), ContinuationSequenceNumber: aws.String(last)}
		select {
		case es.Ch <- &types.SubscribeToShardEventStreamMemberSubscribeToShardEvent{Value: e}:
		case <-es.Closed:
			f.NoteClosed(shard)
			return
		}
	}
}

// TipEvery is how often a subscription at the tip gets an empty event
// (Kinesis: at least every few seconds; shorter here).
const TipEvery = 100 * time.Millisecond

func (f *EFOBacklog) NoteClosed(shard string) {
	f.Mu.Lock()
	defer f.Mu.Unlock()
	f.Shards[shard].Closed++
}

// Reads is every shard's count of events taken and of subscriptions.
func (f *EFOBacklog) Reads() (events map[string]int, subs map[string]int) {
	f.Mu.Lock()
	defer f.Mu.Unlock()
	events, subs = map[string]int{}, map[string]int{}
	for id, sh := range f.Shards {
		events[id], subs[id] = sh.Read, len(sh.Starts)
	}
	return events, subs
}

// Pausable is a slow pipeline: it takes every batch at once, notes its
// Records and acks it after hold, unless paused: then the acks wait for
// resume.
type Pausable struct {
	API  *EFOBacklog
	Hold time.Duration

	Mu      sync.Mutex
	Paused  bool
	Waiting []*consumer.Batch
	Acking  atomic.Int64        // acks under way
	Got     map[string][]string // record sequence numbers by shard, in arrival order
	Events  int
}

func (p *Pausable) Run(ctx context.Context, out <-chan *consumer.Batch) {
	for {
		select {
		case b := <-out:
			p.Mu.Lock()
			for _, r := range b.Records {
				p.Got[b.Shard] = append(p.Got[b.Shard], r.Sequence)
			}
			p.Events++
			p.Mu.Unlock()
			time.AfterFunc(p.Hold, func() { p.Ack(b) })
		case <-ctx.Done():
			return
		}
	}
}

func (p *Pausable) Ack(b *consumer.Batch) {
	p.Mu.Lock()
	if p.Paused {
		p.Waiting = append(p.Waiting, b)
		p.Mu.Unlock()
		return
	}
	p.Acking.Add(1)
	p.Mu.Unlock()
	p.API.Acked.Add(int64(len(b.Records) * p.API.Size))
	b.Ack(nil)
	p.Acking.Add(-1)
}

// Pause holds the acks from now on (on) or acks what it held; paused, it
// returns once no ack decided before is still under way.
func (p *Pausable) Pause(on bool) {
	p.Mu.Lock()
	p.Paused = on
	w := p.Waiting
	p.Waiting = nil
	p.Mu.Unlock()
	for _, b := range w {
		p.Ack(b)
	}
	for on && p.Acking.Load() > 0 {
		time.Sleep(time.Millisecond)
	}
}

func (p *Pausable) Delivered() (events, records int) {
	p.Mu.Lock()
	defer p.Mu.Unlock()
	for _, g := range p.Got {
		records += len(g)
	}
	return p.Events, records
}
