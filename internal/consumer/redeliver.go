package consumer

import (
	"context"
	"errors"

	"github.com/failsafe-go/failsafe-go"

	"github.com/connect-kinesis/connect-kinesis/internal/kinesisx"
)

// errNacked stands for the nack that queued a batch for redelivery.
var errNacked = errors.New("batch nacked by the pipeline")

// newRedeliverRetry builds the policy that sends a nacked batch again until
// the pipeline acks it: with backoff, and with no bound on attempts or time,
// as a record is never skipped. It gives up only when ctx (the reader's
// fetching) ends.
func newRedeliverRetry(ctx context.Context, bo kinesisx.Backoff) failsafe.Executor[any] {
	bo.MaxRetries, bo.MaxElapsedTime = 0, 0
	p := kinesisx.RetryBuilder[any](bo).
		HandleIf(func(_ any, err error) bool { return err != nil && ctx.Err() == nil }).
		Build()
	return failsafe.With(p).WithContext(ctx)
}

func (r *shardReader) nack(b *Batch) {
	if !r.co.c.cfg.RedeliverNacks {
		// Benthos replays nacked batches itself; the batch stays pending
		// so no checkpoint passes it until it is finally acked.
		return
	}
	r.redeliverMu.Lock()
	r.redeliver = append(r.redeliver, b)
	r.redeliverMu.Unlock()
	r.tracker.signal()
}

func (r *shardReader) popRedeliver() *Batch {
	r.redeliverMu.Lock()
	defer r.redeliverMu.Unlock()
	if len(r.redeliver) == 0 {
		return nil
	}
	b := r.redeliver[0]
	r.redeliver = r.redeliver[1:]
	return b
}

func (r *shardReader) hasRedeliver() bool {
	r.redeliverMu.Lock()
	defer r.redeliverMu.Unlock()
	return len(r.redeliver) > 0
}

// redeliverBatch sends a nacked batch again, and again, with backoff
// between attempts (the first wait is for the nack that queued it), until
// the pipeline acks it: a record is never skipped. It returns false when
// the reader stops; a batch not in the pipeline then goes back to the
// queue so that no one waits for its ack.
func (r *shardReader) redeliverBatch(ctx context.Context, b *Batch) bool {
	if b.verdict == nil {
		b.verdict = make(chan error, 1)
	}
	b.redelivering.Store(true)
	defer b.redelivering.Store(false)
	first := true
	inPipeline := false
	err := r.redeliverRetry.Run(func() error {
		if first {
			first = false
			return errNacked
		}
		select {
		case <-b.verdict: // drop a stale verdict
		default:
		}
		select {
		case r.co.c.out <- b:
			inPipeline = true
		case <-ctx.Done():
			return ctx.Err()
		}
		select {
		case err := <-b.verdict:
			inPipeline = false
			return err
		case <-ctx.Done():
			return ctx.Err()
		}
	})
	if err == nil {
		return true
	}
	if !inPipeline {
		r.redeliverMu.Lock()
		r.redeliver = append([]*Batch{b}, r.redeliver...)
		r.redeliverMu.Unlock()
	}
	return false
}
