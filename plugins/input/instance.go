package input

import (
	"context"
	"sync/atomic"

	"github.com/connect-kinesis/connect-kinesis/internal/consumer"
)

// One process per instance id (plugins/checkpointer/instance.go). A
// process that finds its lease.instance_id held by another running
// process, when it connects or later (it was paused for a lease period
// and a new process took the id over), says so at ERROR and ends the
// input: its stream then shuts down, and the connect-kinesis binary exits
// non-zero (Refused). Retrying would not help: the other process keeps
// the id for as long as it runs.

// refusedRun is the first refusal of any kinesis input of this process.
var refusedRun atomic.Pointer[error]

// Refused returns why a kinesis input of this process ended for good, nil
// when none did: another process runs under its lease.instance_id. The
// connect-kinesis binary exits with status 1 when it is set; a program
// that embeds the plugins and runs its own CLI can do the same.
func Refused() error {
	if p := refusedRun.Load(); p != nil {
		return *p
	}
	return nil
}

// refuseLocked ends the input for good with err (k.mu held).
func (k *kinesisInput) refuseLocked(err error) {
	if k.refused != nil {
		return
	}
	k.refused = err
	refusedRun.CompareAndSwap(nil, &err)
	k.log.Errorf("Not reading: %v", err)
}

// refusal is why the input ended for good, nil while it may read.
func (k *kinesisInput) refusal() error {
	k.mu.Lock()
	defer k.mu.Unlock()
	if k.refused != nil {
		return k.refused
	}
	if k.sess != nil && k.sess.claim != nil {
		if err := k.sess.claim.Err(); err != nil {
			k.refuseLocked(err)
			return err
		}
	}
	return nil
}

// watchClaim ends the input when another process takes its instance id
// over: the readers stop, and whatever they commit from then on is
// refused by the new holder's fencing tokens.
func (k *kinesisInput) watchClaim(s *session) {
	go func() {
		select {
		case <-s.claim.Lost():
		case <-s.claim.Stopped():
			if s.claim.Err() == nil {
				return
			}
		}
		_ = k.refusal()
		if err := s.stop(context.Background(), k.conf.Consumer.HandoffTimeout+closeGrace); err != nil {
			k.log.Debugf("Stopping after the instance id was taken over: %v", err)
		}
	}()
}

// next is the consumer's next batch, given up when the instance id is
// taken over while it waits.
func (s *session) next(ctx context.Context) (*consumer.Batch, error) {
	if s.claim == nil {
		return s.cons.Next(ctx)
	}
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	go func() {
		select {
		case <-s.claim.Lost():
			cancel()
		case <-ctx.Done():
		}
	}()
	return s.cons.Next(ctx)
}
