package reader

import (
	"cmp"
	"context"
	"errors"
	"slices"

	"github.com/failsafe-go/failsafe-go"

	"github.com/connect-kinesis/connect-kinesis/internal/kinesisx"
)

// errNacked stands for the nack that queued a batch for redelivery.
var errNacked = errors.New("batch nacked by the pipeline")

// errLeaseDeadline is the verdict on a batch that Admit refused
// after its lease's local deadline: it was not handed to the pipeline.
var errLeaseDeadline = errors.New("lease deadline passed before the batch reached the pipeline")

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

// nack queues a nacked batch to be sent again; it stays pending meanwhile,
// so no checkpoint passes it until it is finally acked.
func (r *Reader) nack(b *delivery) {
	r.queueRedeliver(b)
}

// bounce takes back a batch that Admit refused because the lease's
// deadline had passed: it is sent again, before anything later, once a
// renewal confirms the lease.
func (r *Reader) bounce(b *delivery) {
	r.budget.Returned(&b.charge)
	if b.redelivering.Load() {
		select {
		case b.verdict <- errLeaseDeadline:
		default:
		}
		return
	}
	r.queueRedeliver(b)
}

// queueRedeliver queues a batch to be sent again, in delivery order.
func (r *Reader) queueRedeliver(b *delivery) {
	r.redeliverMu.Lock()
	i, _ := slices.BinarySearchFunc(r.redeliver, b.id, func(q *delivery, id uint64) int { return cmp.Compare(q.id, id) })
	r.redeliver = slices.Insert(r.redeliver, i, b)
	r.redeliverMu.Unlock()
	r.tracker.signal()
}

func (r *Reader) popRedeliver() *delivery {
	r.redeliverMu.Lock()
	defer r.redeliverMu.Unlock()
	if len(r.redeliver) == 0 {
		return nil
	}
	b := r.redeliver[0]
	r.redeliver = r.redeliver[1:]
	return b
}

func (r *Reader) hasRedeliver() bool {
	r.redeliverMu.Lock()
	defer r.redeliverMu.Unlock()
	return len(r.redeliver) > 0
}

// redeliverBatch sends a nacked batch again, and again, with backoff
// between attempts (the first wait is for the nack that queued it), until
// the pipeline acks it: a record is never skipped. It returns false when
// the reader stops; a batch not in the pipeline then goes back to the
// queue so that no one waits for its ack.
func (r *Reader) redeliverBatch(ctx context.Context, b *delivery) bool {
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
		if !r.awaitLease(ctx) {
			return ctx.Err()
		}
		select {
		case r.st.Out <- &b.batch:
			inPipeline = true
			r.budget.HandedOver(&b.charge)
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
		r.queueRedeliver(b)
	}
	return false
}
