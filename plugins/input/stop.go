package input

import (
	"context"
	"errors"
	"sync"
	"time"

	"github.com/connect-kinesis/connect-kinesis/internal/consumer/coordinator"
	"github.com/connect-kinesis/connect-kinesis/plugins/checkpointer"
)

// How the input stops. Benthos stops a stream (SIGTERM, Ctrl-C, a stream
// removed) by telling its input to stop consuming, and calls the input's
// Close only once every batch the input handed over has been acknowledged,
// or once shutdown_timeout has run out. With an output that never answers
// (one that keeps retrying a server that is gone) that is the whole
// shutdown_timeout, and a hand-off begun in Close would come too late to
// release anything. But Benthos passes every ReadBatch call one context
// for the input's whole life, the one its reader cancels the moment it is
// told to stop consuming. The input watches that context and starts its
// hand-off at once: it stops fetching, waits for in-flight batches up to
// lease.handoff_timeout, commits what was acknowledged and releases every
// lease, whether or not the output ever answers. Close then only waits for
// that hand-off to end.

// closeGrace is added to lease.handoff_timeout to bound the hand-off: the
// final commits and releases get that long after the wait for in-flight
// batches.
const closeGrace = 5 * time.Second

// session is what one Connect built: the consumer and its checkpoint store,
// stopped once.
type session struct {
	cons *coordinator.Consumer
	ckpt *checkpointer.Checkpointer
	// claim is this process's claim on its instance id (instance.go),
	// given up once the shards are handed off.
	claim *checkpointer.InstanceClaim
	// endFollow tells the stream discovery (discovery.go) to end, and
	// followDone is closed once it has; both nil without discovery.
	endFollow  func()
	followDone <-chan struct{}

	watchOnce sync.Once
	stopOnce  sync.Once
	stopErr   error
}

// stop hands every shard off and leaves the group within timeout, then
// closes the checkpoint store. A second caller waits for the first.
func (s *session) stop(ctx context.Context, timeout time.Duration) error {
	s.stopOnce.Do(func() {
		ctx, cancel := context.WithTimeout(ctx, timeout)
		defer cancel()
		// The discovery is told to end, not waited for: a Follow may be
		// removing a stream, which waits for that stream's in-flight
		// batches up to lease.handoff_timeout. Close stops every other
		// stream at once, beside that removal, and bounds the removal by
		// the same deadline; waiting for it first left the other streams'
		// readers too little time to commit and release.
		if s.endFollow != nil {
			s.endFollow()
		}
		s.stopErr = s.cons.Close(ctx)
		if s.followDone != nil {
			select {
			case <-s.followDone:
			case <-ctx.Done():
			}
		}
		if err := s.claim.Release(ctx); err != nil && s.stopErr == nil {
			s.stopErr = err
		}
		if err := s.ckpt.Close(); err != nil && s.stopErr == nil {
			s.stopErr = err
		}
	})
	return s.stopErr
}

// watchStop starts the hand-off when ctx, the context Benthos passes to
// ReadBatch, is cancelled: Benthos stopped consuming. Only a cancellation
// counts, so a caller that gave one ReadBatch a deadline of its own does
// not stop the input.
func (k *kinesisInput) watchStop(ctx context.Context, s *session) {
	s.watchOnce.Do(func() {
		context.AfterFunc(ctx, func() {
			if !errors.Is(ctx.Err(), context.Canceled) {
				return
			}
			k.log.Debug("Told to stop consuming: handing every shard off now, without waiting for the pipeline")
			if err := s.stop(context.WithoutCancel(ctx), k.conf.Consumer.HandoffTimeout+closeGrace); err != nil {
				k.log.Debugf("Handing off at the stop: %v", err)
			}
		})
	})
}

// Close hands every shard off (unless the stop already did: then it waits
// for that hand-off), leaves the group and closes the checkpoint store.
// Benthos calls it without a deadline, so it bounds itself by
// lease.handoff_timeout plus a grace for the final commits.
func (k *kinesisInput) Close(ctx context.Context) error {
	k.mu.Lock()
	s := k.sess
	k.sess = nil
	k.mu.Unlock()
	if s == nil {
		return nil
	}
	return s.stop(ctx, k.conf.Consumer.HandoffTimeout+closeGrace)
}
