package consumer

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"time"

	"github.com/failsafe-go/failsafe-go"
	"github.com/redpanda-data/benthos/v4/public/service"

	"github.com/connect-kinesis/connect-kinesis/internal/kinesisx"
)

// shardReader reads one leased shard from a RecordSource and follows its
// batches to ack: the path every source shares (see source.go).
type shardReader struct {
	co      *coordinator
	shard   Shard
	lease   atomic.Pointer[Lease]
	tracker *tracker
	start   startSpec
	log     *service.Logger
	// openSource opens the record source at the reader's start.
	openSource func() RecordSource

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

	// storeRetry, finalRetry and redeliverRetry are built once per reader.
	// finalRetry is storeRetry without max_retries and max_elapsed_time:
	// the hand-back's final commit is retried until it lands, the lease is
	// lost or the reader is ended (finish.go).
	storeRetry, finalRetry failsafe.Executor[any]
	redeliverRetry         failsafe.Executor[any]

	redeliverMu sync.Mutex
	redeliver   []*Batch

	commitMu     sync.Mutex
	committedGen uint64

	lastLagLog time.Time
	progress   readerProgress
	// lanes is set when the shard is read in lanes (lanes.go).
	lanes *laneSet
	// budget is the shard's part of the input's byte budget.
	budget *shardBudget
	// rangeUnknownLogged is set once the reader said its shard's hash key
	// range is unknown (hashrange.go).
	rangeUnknownLogged bool
}

func newShardReader(co *coordinator, shard Shard, l Lease, start startSpec) *shardReader {
	r := &shardReader{
		co:      co,
		shard:   shard,
		tracker: newTracker(),
		start:   start,
		log:     co.log.With("shard", shard.ID),
		renewed: make(chan struct{}),
		done:    make(chan struct{}),
	}
	r.lease.Store(&l)
	r.ctx, r.cancel = context.WithCancel(co.runCtx)
	r.fetchCtx, r.cancelFetch = context.WithCancel(r.ctx)
	r.budget = newShardBudget(co.c.budget, co.c.cfg.Limit, co.fanOut != nil)
	r.openSource = func() RecordSource { return co.newSource(shard.ID, start, r.log, r.budget) }
	r.storeRetry = newStoreRetry(r.ctx, co.c.cfg.Backoff)
	unbounded := co.c.cfg.Backoff
	unbounded.MaxRetries, unbounded.MaxElapsedTime = 0, 0
	r.finalRetry = newStoreRetry(r.ctx, unbounded)
	r.redeliverRetry = newRedeliverRetry(r.fetchCtx, co.c.cfg.Backoff)
	r.progress.startRate(time.Now())
	return r
}

// newStoreRetry retries a store mutation with backoff until it succeeds,
// the backoff's bounds are reached, the lease is lost or held, or ctx ends.
func newStoreRetry(ctx context.Context, b kinesisx.Backoff) failsafe.Executor[any] {
	return failsafe.With(kinesisx.RetryBuilder[any](b).
		HandleIf(func(_ any, err error) bool {
			return err != nil && !errors.Is(err, ErrLeaseLost) && !errors.Is(err, ErrLeaseHeld)
		}).Build()).WithContext(ctx)
}

// stop asks the reader to stop fetching, wait for its in-flight batches
// (up to the hand-off timeout), commit and release its lease.
func (r *shardReader) stop() {
	r.stopping.Store(true)
	r.cancelFetch()
}

// leaseRenewed stores a renewed (or re-seeded) lease and wakes everything
// of the reader that waits for one.
func (r *shardReader) leaseRenewed(l Lease) {
	r.lease.Store(&l)
	r.renewedMu.Lock()
	defer r.renewedMu.Unlock()
	close(r.renewed)
	r.renewed = make(chan struct{})
}

// nextRenewal returns a channel closed at the next renewal. A waiter takes
// it before it looks at the deadline, so a renewal in between is not missed.
func (r *shardReader) nextRenewal() <-chan struct{} {
	r.renewedMu.Lock()
	defer r.renewedMu.Unlock()
	return r.renewed
}

// leaseLive reports whether the lease's local deadline is still ahead. A
// lease without a deadline (a store that does not say) counts as live.
func (r *shardReader) leaseLive() bool {
	d := r.lease.Load().Deadline
	return d.IsZero() || time.Now().Before(d)
}

// awaitLease returns at once while the lease's local deadline is ahead.
// Past it, another instance may hold the shard already (this process was
// paused, or renewals are late), so the reader neither fetches nor delivers
// until a renewal confirms the lease (true) or the reader ends (false): a
// lost lease ends it through markLost.
func (r *shardReader) awaitLease(ctx context.Context) bool {
	waited := false
	for {
		renewal := r.nextRenewal()
		if r.leaseLive() {
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

// markLost ends the reader at once and counts the lost lease; it commits
// nothing more.
func (r *shardReader) markLost() {
	r.co.c.metrics.lost.Incr(1, r.co.streamName)
	r.lost.Store(true)
	r.stopping.Store(true)
	r.cancel()
}

func (r *shardReader) run() {
	defer close(r.done)
	defer r.cancel()
	defer r.budget.close()
	// The shard leaves this instance however the reader ends: its lag is
	// no longer this instance's to report, and a frozen value would keep an
	// alert firing and count twice in a sum over instances.
	defer r.co.c.metrics.behind.Set(0, r.co.streamName, r.shard.ID)
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
// (true), or until the reader is stopped or ended (false). Between batches
// it serves redeliveries first, keeps within shard_max_in_flight, and waits
// for the source's pace where an ack or nack can still wake it. A response
// that KPL de-aggregation made longer than `limit` user records is handed
// over in batches of at most `limit`, each delivered before the next fetch.
func (r *shardReader) read() bool {
	if r.start.closeUnread {
		return true
	}
	if r.co.c.cfg.ShardParallelism > 1 {
		return r.readLanes()
	}
	cfg := &r.co.c.cfg
	ctx := r.fetchCtx
	src := r.openSource()
	defer src.Close()
	ended := false
	var held []Record // fetched, not yet delivered
	var behind int64
	for {
		if ctx.Err() != nil {
			return false
		}
		if b := r.popRedeliver(); b != nil {
			if !r.redeliverBatch(ctx, b) {
				return false
			}
			continue
		}
		full := r.tracker.pending() >= cfg.ShardMaxInFlight
		switch {
		case len(held) > 0 && !full:
			n := min(len(held), cfg.Limit)
			if !r.deliver(ctx, held[:n:n], behind) {
				return false
			}
			// Once all of it is handed over, the answer is the pipeline's:
			// an empty held[n:] would still point at its records (Go keeps
			// the base of a slice cut to zero capacity) and keep them alive
			// while the next answer is fetched, two answers per shard.
			held = held[n:]
			if len(held) == 0 {
				held = nil
			}
			continue
		case ended && len(held) == 0 && r.tracker.pending() == 0:
			return true
		case full || ended || len(held) > 0:
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
		held, behind = r.convert(sb.Records), sb.MillisBehindLatest
		r.budget.settle(held)
		if sb.End {
			ended = true
			r.co.requestDiscovery()
		}
	}
}

// fetch asks the source for its next batch once the pace allows and the
// lease is confirmed. got is false when there is nothing to hand over yet
// (the pace's wait ended early for an ack, or Kinesis did not find a shard
// that is still listed): the caller looks at its state again. gone reports
// a shard trimmed past the retention period; ok false means stop reading.
func (r *shardReader) fetch(ctx context.Context, src RecordSource) (sb SourceBatch, got, gone, ok bool) {
	if d := time.Until(src.NextAt()); d > 0 {
		t := time.NewTimer(d)
		ok := r.wait(ctx, t.C)
		t.Stop()
		return sb, false, false, ok
	}
	if !r.awaitLease(ctx) {
		return sb, false, false, false
	}
	if in, ok := r.admit(ctx); !in {
		return sb, false, false, ok
	}
	sb, err := src.Next(ctx)
	r.budget.answered(sb.Records, err)
	if errors.Is(err, ErrShardNotFound) {
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
func (r *shardReader) wait(ctx context.Context, timer <-chan time.Time) bool {
	select {
	case <-r.tracker.notify:
		return true
	case <-timer:
		return true
	case <-ctx.Done():
		return false
	}
}
