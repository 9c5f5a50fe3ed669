package reader

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"time"

	"github.com/failsafe-go/failsafe-go"
	"github.com/redpanda-data/benthos/v4/public/service"

	"github.com/connect-kinesis/connect-kinesis/internal/consumer"
	"github.com/connect-kinesis/connect-kinesis/internal/consumer/budget"
	"github.com/connect-kinesis/connect-kinesis/internal/consumer/source"
	"github.com/connect-kinesis/connect-kinesis/internal/kinesisx"
)

// Reader reads one leased shard from a source.RecordSource and follows its
// batches to ack: the path every source shares (see the source package).
type Reader struct {
	st      *Stream
	shard   consumer.Shard
	lease   atomic.Pointer[consumer.Lease]
	tracker *tracker
	start   source.Start
	// raisedMark is a redelivery mark learned after the take (a re-seed
	// that won the shard back from a newcomer), when above start's.
	raisedMark atomic.Pointer[consumer.Position]
	log        *service.Logger
	// openSource opens the record source at the reader's start.
	openSource func() source.RecordSource

	// ctx ends the reader at once (lease lost, or shutdown out of time).
	ctx    context.Context
	cancel context.CancelFunc
	// fetchCtx also ends when the reader is asked to stop fetching
	// (hand-off, shutdown); the reader then drains acks and commits.
	fetchCtx    context.Context
	cancelFetch context.CancelFunc
	stopping    atomic.Bool
	lost        atomic.Bool
	// releasing is set just before the lease is released or the shard
	// closed: renewals leave the lease alone from then on, so one racing
	// with the release does not report it lost.
	releasing atomic.Bool
	// renewed is closed and replaced (under renewedMu) each time a renewal
	// or a re-seed confirms the lease: the fetcher and every lane may wait
	// past the lease's local deadline at once, and one confirmation wakes
	// them all.
	renewedMu sync.Mutex
	renewed   chan struct{}
	// waitLogged is set while a wait past the deadline has been logged, so
	// the fetcher and N lanes waiting together log it once.
	waitLogged  atomic.Bool
	done        chan struct{}
	closedShard bool // written before done is closed
	streamGone  bool // written before done is closed
	// released says a hand-back committed and released the lease; unacked
	// is how many records it left past the committed checkpoint (not
	// acknowledged, or behind one that was not). Both are written before
	// done is closed.
	released bool
	unacked  int
	// unackedCause is why the hand-back left them.
	unackedCause UnackedCause

	// storeRetry and redeliverRetry are built once per reader; the
	// hand-back's final commit has its own (newFinalRetry, finish.go).
	storeRetry     failsafe.Executor[any]
	redeliverRetry failsafe.Executor[any]

	redeliverMu sync.Mutex
	redeliver   []*delivery
	// refused are the direct path's batches Admit refused and has not
	// admitted since (admitInOrder), under redeliverMu.
	refused []uint64
	// isolating are the batches sent again in parts, with their first
	// delivery's time and the arrival of their oldest record not done
	// (gauge.go); oldestEnded says the reader ended and its gauges are 0
	// for good. Under redeliverMu.
	isolating   map[*delivery]isolated
	oldestEnded bool
	// srcBehind is the MillisBehindLatest of the source's last answer;
	// the lag gauge reports it unless a waiting record is older.
	srcBehind atomic.Int64
	// lastBlockedWarn is when the reader last warned that a record
	// blocks the shard (UnixNano; blocked.go).
	lastBlockedWarn atomic.Int64

	commitMu     sync.Mutex
	committedGen uint64

	lastLagLog time.Time
	progress   readerProgress
	// processed is when the input's pipeline last processed a record
	// (isolate.go): Stream.Processed, or the reader's own without one.
	processed *Processed
	// lanes is set when the shard is read in lanes (lanes.go).
	lanes *laneSet
	// budget is the shard's part of the input's byte budget.
	budget *budget.Shard
	// rangeUnknownLogged is set once the reader said its shard's hash key
	// range is unknown (hashrange.go).
	rangeUnknownLogged bool
}

// New is the reader of a shard taken under lease l, starting at start;
// Run reads it.
func New(st *Stream, shard consumer.Shard, l consumer.Lease, start source.Start) *Reader {
	r := &Reader{
		st:      st,
		shard:   shard,
		tracker: newTracker(),
		start:   start,
		log:     st.Log.With("shard", shard.ID),
		renewed: make(chan struct{}),
		done:    make(chan struct{}),
	}
	if r.processed = st.Processed; r.processed == nil {
		r.processed = new(Processed)
	}
	r.lease.Store(&l)
	r.ctx, r.cancel = context.WithCancel(st.Ctx)
	r.fetchCtx, r.cancelFetch = context.WithCancel(r.ctx)
	r.budget = budget.NewShard(st.Budget, st.Config.Limit, st.Push, r.tracker.notify, st.Name+"/"+shard.ID)
	r.openSource = func() source.RecordSource { return st.OpenSource(shard.ID, start, r.log, r.budget) }
	r.storeRetry = newStoreRetry(r.ctx, st.Config.Backoff)
	r.redeliverRetry = newRedeliverRetry(r.fetchCtx, st.Config.Backoff)
	r.progress.startRate(time.Now())
	return r
}

// newStoreRetry retries a store mutation with backoff until it succeeds,
// the backoff's bounds are reached, the lease is lost or held, or ctx ends.
func newStoreRetry(ctx context.Context, b kinesisx.Backoff) failsafe.Executor[any] {
	return failsafe.With(kinesisx.RetryBuilder[any](b).
		HandleIf(func(_ any, err error) bool {
			return err != nil && !errors.Is(err, consumer.ErrLeaseLost) && !errors.Is(err, consumer.ErrLeaseHeld)
		}).Build()).WithContext(ctx)
}

// Stop asks the reader to stop fetching, wait for its in-flight batches
// (up to the hand-off timeout), commit and release its lease.
func (r *Reader) Stop() {
	r.stopping.Store(true)
	r.cancelFetch()
}

// LeaseRenewed stores a renewed (or re-seeded) lease and wakes everything
// of the reader that waits for one.
func (r *Reader) LeaseRenewed(l consumer.Lease) {
	r.lease.Store(&l)
	r.renewedMu.Lock()
	defer r.renewedMu.Unlock()
	close(r.renewed)
	r.renewed = make(chan struct{})
}

// RaiseDelivered raises the redelivery mark the reader's records are
// marked against (Batch.Redelivered) to p, when p is above it: a re-seed
// that won the shard back from a newcomer learned how far that newcomer may
// have delivered it, and the records it reads again up to there are
// delivered marked.
func (r *Reader) RaiseDelivered(p consumer.Position) {
	for {
		cur := r.raisedMark.Load()
		if p.IsZero() || (cur != nil && p.Compare(*cur) <= 0) {
			return
		}
		if r.raisedMark.CompareAndSwap(cur, &p) {
			return
		}
	}
}

// deliveredBefore is the redelivery mark a new delivery is marked against:
// the take's, or a higher one learned since.
func (r *Reader) deliveredBefore() consumer.Position {
	m := r.start.DeliveredBefore
	if p := r.raisedMark.Load(); p != nil && (m.IsZero() || p.Compare(m) > 0) {
		m = *p
	}
	return m
}

// nextRenewal returns a channel closed at the next renewal. A waiter takes
// it before it looks at the deadline, so a renewal in between is not missed.
func (r *Reader) nextRenewal() <-chan struct{} {
	r.renewedMu.Lock()
	defer r.renewedMu.Unlock()
	return r.renewed
}

// LeaseLive reports whether the lease's local deadline is still ahead. A
// lease without a deadline (a store that does not say) counts as live.
func (r *Reader) LeaseLive() bool {
	d := r.lease.Load().Deadline
	return d.IsZero() || time.Now().Before(d)
}

// awaitLease returns at once while the lease's local deadline is ahead.
// Past it, another instance may hold the shard already (this process was
// paused, or renewals are late), so the reader neither fetches nor delivers
// until a renewal confirms the lease (true) or the reader ends (false): a
// lost lease ends it through markLost.
func (r *Reader) awaitLease(ctx context.Context) bool {
	waited := false
	for {
		renewal := r.nextRenewal()
		if r.LeaseLive() {
			break
		}
		waited = true
		// The fetcher and every lane may wait at once: the first says so.
		if r.waitLogged.CompareAndSwap(false, true) {
			r.log.Warnf("The lease's local deadline passed %v ago (was the process paused?); not reading until a renewal confirms the lease", time.Since(r.lease.Load().Deadline).Round(time.Millisecond))
		}
		select {
		case <-renewal:
		case <-ctx.Done():
			return false
		}
	}
	if waited && r.waitLogged.CompareAndSwap(true, false) {
		r.log.Info("Lease renewed; reading the shard again")
	}
	return true
}

// MarkLost ends the reader at once and counts the lost lease; it commits
// nothing more.
func (r *Reader) MarkLost() {
	r.st.Metrics.Lost.Incr(1, r.st.Name)
	r.lost.Store(true)
	r.stopping.Store(true)
	r.cancel()
}

// Run reads the shard until it ends (closed), is stopped (handed back) or
// its lease is lost; Done is closed then.
func (r *Reader) Run() {
	defer close(r.done)
	defer r.cancel()
	defer r.budget.Close()
	// The shard leaves this instance however the reader ends: its lag is
	// no longer this instance's to report, and a frozen value would keep an
	// alert firing and count twice in a sum over instances.
	defer r.st.Metrics.Behind.Set(0, r.st.Name, r.shard.ID)
	defer r.endOldest()
	if r.st.Marker != nil {
		defer r.st.Marker.Forget(r.shard.ID)
	}
	commitStop := make(chan struct{})
	commitDone := make(chan struct{})
	go r.commitLoop(commitStop, commitDone)
	ended := r.read()
	// However reading ended (also by itself: a recreated stream, a shard
	// gone), fetching has: idle lanes return at once, and only a lane
	// with a batch in the pipeline is waited for.
	r.cancelFetch()
	close(commitStop)
	<-commitDone
	switch {
	case r.lost.Load():
		r.log.Debug("Stopped reading the shard without committing: the lease is lost")
	case ended:
		r.closeShard()
	default:
		r.handBack()
	}
}

// read delivers the shard's records until it ends and every batch is acked
// (true), or until the reader is stopped or ended (false). Records go to
// the pipeline through the reader's outlet: straight, one batch per
// answer within shard_max_in_flight (delivery.go), or through lanes with
// shard_parallelism above 1 (lanes.go). Between answers the outlet serves
// what it owes first (redeliveries, held records), and the reader waits
// for the source's pace where an ack or nack can still wake it.
func (r *Reader) read() bool {
	if r.start.CloseUnread {
		return true
	}
	ctx := r.fetchCtx
	src := r.openSource()
	defer src.Close()
	out := r.newOutlet()
	ended := false
	for {
		if ctx.Err() != nil {
			return false
		}
		busy, ok := out.serve(ctx)
		if !ok {
			return false
		}
		if busy {
			continue
		}
		switch {
		case ended && out.empty() && r.tracker.pending() == 0:
			return true
		case ended || !out.ready():
			if !r.wait(ctx, nil) {
				return false
			}
			continue
		}
		sb, got, gone, ok := r.fetch(ctx, src)
		if !ok {
			return false
		}
		ended = ended || gone
		if !got {
			continue
		}
		r.lag(sb.MillisBehindLatest)
		asked := r.askMark(sb.Records)
		recs := r.convert(sb.Records)
		r.budget.Settle(recs, sb.Records, sb.MillisBehindLatest)
		if !r.cover(ctx, recs, asked) {
			return false
		}
		out.put(recs, sb.MillisBehindLatest)
		if sb.End {
			ended = true
			r.st.RequestDiscovery()
		}
	}
}

// outlet is where a reader's fetched records go to the pipeline.
type outlet interface {
	// serve does what the outlet owes now (a redelivery, held records):
	// busy when it did something, ok false when ctx ended.
	serve(ctx context.Context) (busy, ok bool)
	// ready says another answer may be fetched.
	ready() bool
	// empty says no fetched record waits in the outlet.
	empty() bool
	// put takes the user records of one answer.
	put(recs []consumer.Record, behind int64)
}

// newOutlet is the reader's outlet: lanes with shard_parallelism above 1.
func (r *Reader) newOutlet() outlet {
	if n := r.st.Config.ShardParallelism; n > 1 {
		ls := newLaneSet(r, n)
		r.lanes = ls
		ls.start()
		return ls
	}
	return &directOutlet{r: r}
}

// fetch asks the source for its next batch once the pace allows and the
// lease is confirmed. got is false when there is nothing to hand over yet
// (the pace's or the budget's wait ended early for an ack, or Kinesis did
// not find a shard that is still listed): the caller looks at its state again. gone reports
// a shard trimmed past the retention period; ok false means stop reading.
func (r *Reader) fetch(ctx context.Context, src source.RecordSource) (sb source.Batch, got, gone, ok bool) {
	if d := time.Until(src.NextAt()); d > 0 {
		t := time.NewTimer(d)
		ok := r.wait(ctx, t.C)
		t.Stop()
		return sb, false, false, ok
	}
	if !r.awaitLease(ctx) {
		return sb, false, false, false
	}
	sb, err := src.Next(ctx)
	if err != nil {
		r.budget.GiveBack() // the source gives back what a failed call held; this is for certain
	}
	if errors.Is(err, budget.ErrServeReader) {
		return sb, false, false, true // an ack or nack came while it waited for room
	}
	if errors.Is(err, source.ErrShardNotFound) {
		gone, stop := r.sourceNotFound(ctx, err)
		return sb, false, gone, !stop
	}
	if err != nil {
		return sb, false, false, false // the source gives up only when ctx ends
	}
	return sb, true, false, true
}

// wait blocks until an ack or nack arrives, the optional timer fires, or
// ctx ends (false).
func (r *Reader) wait(ctx context.Context, timer <-chan time.Time) bool {
	select {
	case <-r.tracker.notify:
		return true
	case <-timer:
		return true
	case <-ctx.Done():
		return false
	}
}
