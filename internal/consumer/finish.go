package consumer

import (
	"context"
	"errors"
	"time"

	"github.com/failsafe-go/failsafe-go"
)

// How a shard reader finishes: it closes a shard read to its end, or hands
// the lease back after a hand-off or shutdown, once its batches are acked.

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
// starts right after them. The final commit is retried until it lands, the
// lease is lost, or the reader is ended (the shutdown's time is up),
// whatever backoff.max_elapsed_time and max_retries say: the renewals go on
// meanwhile, so nobody takes the shard, and giving up would leave the lease
// to expire and the next owner to read again every record acked since the
// last commit. The lease is released only after the commit landed, so a
// store that cannot be reached never makes the next owner start before
// records acked here. Unreleased, the lease frees itself after
// lease.period.
func (r *shardReader) handBack() {
	r.waitAcked(r.co.c.cfg.HandoffTimeout)
	err := r.retryMutation(r.finalRetry, r.commit)
	if errors.Is(err, ErrLeaseLost) {
		return
	}
	if err != nil {
		pos, _, _ := r.tracker.checkpoint()
		r.log.Errorf("Could not commit the final checkpoint %s before the reader had to stop; the records acked since the last commit will be read again by the shard's next owner, after lease.period: %v", pos, err)
		return
	}
	r.releasing.Store(true)
	err = r.storeMutation(func(ctx context.Context) error { return r.co.store.Release(ctx, *r.lease.Load()) })
	if err != nil && !errors.Is(err, ErrLeaseLost) {
		r.log.Warnf("Releasing the lease failed; it frees itself after lease.period: %v", err)
	}
}

// storeMutation runs a store mutation with backoff until it succeeds, the
// backoff's bounds are reached, the lease is lost, or the reader is ended.
func (r *shardReader) storeMutation(fn func(ctx context.Context) error) error {
	return r.retryMutation(r.storeRetry, fn)
}

// retryMutation runs fn with retry, marking the reader lost when the store
// says the lease is.
func (r *shardReader) retryMutation(retry failsafe.Executor[any], fn func(ctx context.Context) error) error {
	err := retry.Run(func() error { return fn(r.ctx) })
	if errors.Is(err, ErrLeaseLost) {
		r.markLost()
	}
	return err
}

// waitAcked waits until every delivered batch is acked, the timeout passes
// or the reader ends. Nacked batches waiting for redelivery will not be
// acked now, so waiting for them is pointless.
func (r *shardReader) waitAcked(timeout time.Duration) {
	if r.lanes != nil {
		r.lanes.waitIdle(timeout)
		return
	}
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
