package reader

import (
	"context"
	"errors"
	"time"

	"github.com/failsafe-go/failsafe-go"

	"github.com/connect-kinesis/connect-kinesis/internal/consumer"
	"github.com/connect-kinesis/connect-kinesis/internal/kinesisx"
)

// How a shard reader finishes: it closes a shard read to its end, or hands
// the lease back after a hand-off or shutdown, once its batches are acked.

// closeShard runs once every record is delivered and acked: it closes the
// shard atomically (checkpoint SHARD_END, closed set, lease released),
// which opens the gate for its children.
func (r *Reader) closeShard() {
	r.releasing.Store(true)
	err := r.storeMutation(func(ctx context.Context) error { return r.st.Store.CloseShard(ctx, *r.lease.Load()) })
	if err != nil {
		r.log.Warnf("Closing the shard failed: %v", err)
		return
	}
	r.closedShard = true
	r.log.Debug("Shard read to its end and closed")
}

// handBack runs when the reader stops for a hand-off or shutdown: it waits
// for in-flight batches (up to lease.handoff_timeout), then commits and
// releases so the next owner starts right after them. The lease is
// released only after the final commit landed, so a store that cannot be
// reached never makes the next owner start before records acked here.
//
// The final commit is retried past backoff.max_elapsed_time and
// max_retries: giving up early would leave the next owner to read again
// every record acked since the last commit. At shutdown it is retried
// until the shutdown's time is up (the reader is ended); in a rebalance
// hand-off for at most lease.handoff_timeout, because the renewals go on
// meanwhile and a store that refuses this owner's commits (no replica to
// acknowledge them, a lost permission) would otherwise keep the shard
// here, read by no one, for good. A commit given up on leaves the lease
// unrenewed: it lapses after lease.period and the next owner reads again
// from the last commit.
func (r *Reader) handBack() {
	r.unackedCause = r.waitAcked(r.st.Config.HandoffTimeout)
	r.unacked = r.tracker.pendingRecords()
	ctx, bound := r.ctx, time.Duration(0)
	if !r.st.ShuttingDown() {
		bound = r.st.Config.HandoffTimeout
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(r.ctx, bound)
		defer cancel()
	}
	var last error
	err := r.retryMutation(ctx, newFinalRetry(ctx, r.st.Config.Backoff), func(ctx context.Context) error {
		err := r.commit(ctx)
		if err != nil && ctx.Err() == nil {
			last = err
		}
		return err
	})
	if errors.Is(err, consumer.ErrLeaseLost) {
		return
	}
	if err != nil {
		r.releasing.Store(true) // renewals leave the lease to lapse
		pos, _, _ := r.tracker.checkpoint()
		if last == nil {
			last = err
		}
		if bound > 0 && r.ctx.Err() == nil {
			r.log.Errorf("Could not commit the final checkpoint %s of the hand-off within lease.handoff_timeout (%v); the lease is no longer renewed, so the shard's next owner takes it after lease.period and reads again the records acked since the last commit: %v", pos, bound, last)
			return
		}
		r.log.Errorf("Could not commit the final checkpoint %s before the reader had to stop; the records acked since the last commit will be read again by the shard's next owner, after lease.period: %v", pos, last)
		return
	}
	r.releasing.Store(true)
	err = r.storeMutation(func(ctx context.Context) error { return r.st.Store.Release(ctx, *r.lease.Load()) })
	if err != nil && !errors.Is(err, consumer.ErrLeaseLost) {
		r.log.Warnf("Releasing the lease failed; it frees itself after lease.period: %v", err)
		return
	}
	r.released = err == nil
}

// newFinalRetry retries a hand-back's final commit with backoff until it
// lands, the lease is lost or ctx ends, whatever backoff.max_retries and
// max_elapsed_time say.
func newFinalRetry(ctx context.Context, b kinesisx.Backoff) failsafe.Executor[any] {
	b.MaxRetries, b.MaxElapsedTime = 0, 0
	return newStoreRetry(ctx, b)
}

// storeMutation runs a store mutation with backoff until it succeeds, the
// backoff's bounds are reached, the lease is lost, or the reader is ended.
func (r *Reader) storeMutation(fn func(ctx context.Context) error) error {
	return r.retryMutation(r.ctx, r.storeRetry, fn)
}

// retryMutation runs fn with ctx and retry (built on the same ctx),
// marking the reader lost when the store says the lease is.
func (r *Reader) retryMutation(ctx context.Context, retry failsafe.Executor[any], fn func(ctx context.Context) error) error {
	err := retry.Run(func() error { return fn(ctx) })
	if errors.Is(err, consumer.ErrLeaseLost) {
		r.MarkLost()
	}
	return err
}

// waitAcked waits until every delivered batch is acked, the timeout passes
// or the reader ends. Nacked batches waiting for redelivery will not be
// acked now, so waiting for them is pointless. It returns why any records
// still pending were left, for the stop's line.
func (r *Reader) waitAcked(timeout time.Duration) UnackedCause {
	if r.lanes != nil {
		return r.lanes.waitIdle(timeout)
	}
	t := time.NewTimer(timeout)
	defer t.Stop()
	for r.tracker.pending() > 0 {
		if r.hasRedeliver() {
			return UnackedNacked
		}
		select {
		case <-r.tracker.notify:
		case <-t.C:
			r.log.Warnf("Stopped waiting for %d in-flight batches after %v; they may be delivered again", r.tracker.pending(), timeout)
			return UnackedTimeout
		case <-r.ctx.Done():
			return UnackedEnded
		}
	}
	return UnackedTimeout
}
