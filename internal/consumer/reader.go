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
	releasing   atomic.Bool
	done        chan struct{}
	closedShard bool // written before done is closed

	// storeRetry and redeliverRetry are built once per reader.
	storeRetry     failsafe.Executor[any]
	redeliverRetry failsafe.Executor[any]

	redeliverMu sync.Mutex
	redeliver   []*Batch

	commitMu     sync.Mutex
	committedGen uint64

	lastLagLog time.Time
}

func newShardReader(co *coordinator, shard Shard, l Lease, start startSpec) *shardReader {
	r := &shardReader{
		co:      co,
		shard:   shard,
		tracker: newTracker(),
		start:   start,
		log:     co.log.With("shard", shard.ID),
		done:    make(chan struct{}),
	}
	r.lease.Store(&l)
	r.ctx, r.cancel = context.WithCancel(co.runCtx)
	r.fetchCtx, r.cancelFetch = context.WithCancel(r.ctx)
	r.openSource = func() RecordSource { return co.newSource(shard.ID, start, r.log) }
	r.storeRetry = failsafe.With(kinesisx.RetryBuilder[any](co.c.cfg.Backoff).
		HandleIf(func(_ any, err error) bool {
			return err != nil && !errors.Is(err, ErrLeaseLost) && !errors.Is(err, ErrLeaseHeld)
		}).Build()).WithContext(r.ctx)
	r.redeliverRetry = newRedeliverRetry(r.fetchCtx, co.c.cfg.Backoff)
	return r
}

// stop asks the reader to stop fetching, wait for its in-flight batches
// (up to the hand-off timeout), commit and release its lease.
func (r *shardReader) stop() {
	r.stopping.Store(true)
	r.cancelFetch()
}

// markLost ends the reader at once; it commits nothing more.
func (r *shardReader) markLost() {
	r.lost.Store(true)
	r.stopping.Store(true)
	r.cancel()
}

func (r *shardReader) run() {
	defer close(r.done)
	defer r.cancel()
	commitStop := make(chan struct{})
	commitDone := make(chan struct{})
	go r.commitLoop(commitStop, commitDone)
	ended := r.read()
	close(commitStop)
	<-commitDone
	switch {
	case r.lost.Load():
		r.log.Warn("Lease lost; stopped reading the shard without committing")
	case ended:
		r.closeShard()
	default:
		r.handBack()
	}
}

// closeShard runs once every record is delivered and acked: it closes the
// shard atomically (checkpoint SHARD_END, closed set, lease released),
// which opens the gate for its children.
func (r *shardReader) closeShard() {
	r.releasing.Store(true)
	err := r.storeMutation(func(ctx context.Context) error { return r.co.store.CloseShard(ctx, *r.lease.Load()) })
	if err != nil {
		r.log.Warnf("Closing the shard failed: %v", err)
		return
	}
	r.closedShard = true
	r.log.Debug("Shard read to its end and closed")
}

// handBack runs when the reader stops for a hand-off or shutdown: it waits
// for in-flight batches, then commits and releases so the next owner
// starts right after them.
func (r *shardReader) handBack() {
	r.waitAcked(r.co.c.cfg.HandoffTimeout)
	if err := r.commit(r.ctx); errors.Is(err, ErrLeaseLost) {
		return
	}
	r.releasing.Store(true)
	err := r.storeMutation(func(ctx context.Context) error { return r.co.store.Release(ctx, *r.lease.Load()) })
	if err != nil && !errors.Is(err, ErrLeaseLost) {
		r.log.Warnf("Releasing the lease failed; it frees itself after lease.period: %v", err)
	}
}

// storeMutation runs a store mutation with backoff until it succeeds, the
// lease is lost, or the reader is ended.
func (r *shardReader) storeMutation(fn func(ctx context.Context) error) error {
	err := r.storeRetry.Run(func() error { return fn(r.ctx) })
	if errors.Is(err, ErrLeaseLost) {
		r.co.c.metrics.lost.Incr(1, r.co.streamName)
		r.markLost()
	}
	return err
}

// waitAcked waits until every delivered batch is acked, the timeout passes
// or the reader ends. Nacked batches waiting for redelivery will not be
// acked now, so waiting for them is pointless.
func (r *shardReader) waitAcked(timeout time.Duration) {
	t := time.NewTimer(timeout)
	defer t.Stop()
	for r.tracker.pending() > 0 && !r.hasRedeliver() {
		select {
		case <-r.tracker.notify:
		case <-t.C:
			r.log.Warnf("Stopped waiting for %d in-flight batches after %v; they may be delivered again", r.tracker.pending(), timeout)
			return
		case <-r.ctx.Done():
			return
		}
	}
}

// read delivers the shard's records until it ends and every batch is acked
// (true), or until the reader is stopped or ended (false). Between batches
// it serves redeliveries first, keeps within shard_max_in_flight, and waits
// for the source's pace where an ack or nack can still wake it.
func (r *shardReader) read() bool {
	if r.start.closeUnread {
		return true
	}
	ctx := r.fetchCtx
	src := r.openSource()
	defer src.Close()
	ended := false
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
		if ended || r.tracker.pending() >= r.co.c.cfg.ShardMaxInFlight {
			if ended && r.tracker.pending() == 0 {
				return true
			}
			if !r.wait(ctx, nil) {
				return false
			}
			continue
		}
		if d := time.Until(src.NextAt()); d > 0 {
			t := time.NewTimer(d)
			ok := r.wait(ctx, t.C)
			t.Stop()
			if !ok {
				return false
			}
			continue
		}
		sb, err := src.Next(ctx)
		if err != nil {
			return false // the source gives up only when ctx ends
		}
		r.lag(sb.MillisBehindLatest)
		if recs := r.convert(sb.Records); len(recs) > 0 && !r.deliver(ctx, recs, sb.MillisBehindLatest) {
			return false
		}
		if sb.End {
			ended = true
			r.co.requestDiscovery()
		}
	}
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
