package reader

import (
	"cmp"
	"context"
	"errors"
	"slices"
	"time"

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

// admitInOrder says whether the direct path's batch id may reach the
// pipeline: not while a batch handed over before it (a lower tracker id)
// was refused by Admit and has not been admitted since. With
// shard_max_in_flight above 1 the next batch may already wait in its send
// behind the refused one, and the reader may even have taken the refused
// one back from the queue to hand it over again: admitted first, its
// records would reach the pipeline before the earlier ones ever did. A
// nacked batch does not count: it reached the pipeline, and the batches
// behind it go on (architecture.md, per-shard order). Admitting id clears
// its own refusal.
func (r *Reader) admitInOrder(id uint64) bool {
	r.redeliverMu.Lock()
	defer r.redeliverMu.Unlock()
	for _, rid := range r.refused {
		if rid < id {
			return false
		}
	}
	r.refused = slices.DeleteFunc(r.refused, func(rid uint64) bool { return rid == id })
	return true
}

// clearRefused forgets a refusal of batch id, done.
func (r *Reader) clearRefused(id uint64) {
	r.redeliverMu.Lock()
	defer r.redeliverMu.Unlock()
	r.refused = slices.DeleteFunc(r.refused, func(rid uint64) bool { return rid == id })
}

// noteRefused records that Admit refused the direct path's batch id.
func (r *Reader) noteRefused(id uint64) {
	r.redeliverMu.Lock()
	defer r.redeliverMu.Unlock()
	if !slices.Contains(r.refused, id) {
		r.refused = append(r.refused, id)
	}
}

func (r *Reader) hasRedeliver() bool {
	r.redeliverMu.Lock()
	defer r.redeliverMu.Unlock()
	return len(r.redeliver) > 0
}

// redeliverBatch sends a nacked batch of the reader's own path again (in
// parts, isolate.go) until every record of it is done. It returns false
// when the reader stops.
func (r *Reader) redeliverBatch(ctx context.Context, d *delivery) bool {
	return r.follow(ctx, ctx, d)
}

// follow hands d's parts to the pipeline, one at a time, and applies their
// verdicts until every record of d is done (true): processed, or taken by
// the dead letter. A failure (charged or not) or a refusal past the lease's deadline
// waits the backoff before the next hand-over; a part that was processed or
// halved is followed at once. Parts are handed over with send and their
// verdicts awaited with wait (a lane awaits a verdict after fetching
// stopped, so a hand-off waits for it). It returns false when either ends;
// a batch with no part in the pipeline then goes back to the redelivery
// queue (direct path) so that nobody waits for its ack, and one in the
// pipeline is queued by its verdict.
func (r *Reader) follow(send, wait context.Context, d *delivery) bool {
	d.mu.Lock()
	d.attached = true
	backoff := d.last == outcomeFailed || d.last == outcomeBounced
	d.mu.Unlock()
	ok := false
	defer func() {
		if !ok {
			r.detach(d)
		}
	}()
	for {
		if !r.deadLetter(send, d) {
			return false
		}
		d.mu.Lock()
		finished := d.allDone
		d.mu.Unlock()
		if finished {
			ok = true
			return true
		}
		err := r.redeliverRetry.Run(func() error {
			if backoff {
				backoff = false
				return errNacked
			}
			for {
				select {
				case <-d.verdict: // drop a stale signal
				default:
				}
				d.mu.Lock()
				p := d.next(time.Now())
				first := !d.delivered
				if first {
					d.at = time.Now()
				}
				d.delivered = true
				d.mu.Unlock()
				if p == nil {
					return nil // done, or records for the dead letter
				}
				if send.Err() != nil || !r.handOver(send, p.batch, &d.charge) {
					d.unsend(p)
					return send.Err()
				}
				if first {
					r.countDelivered(p.batch.Records)
				}
				select {
				case <-d.verdict:
				case <-wait.Done():
					return wait.Err()
				}
				d.mu.Lock()
				last := d.last
				d.mu.Unlock()
				switch last {
				case outcomeFailed:
					return errNacked
				case outcomeBounced:
					return errLeaseDeadline
				case outcomeDone:
					return nil
				}
			}
		})
		if err != nil {
			return false
		}
	}
}

// unsend takes back part p, which never reached the pipeline.
func (d *delivery) unsend(p *part) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.out != p {
		return
	}
	d.out = nil
	if d.iso == nil {
		return
	}
	idx := d.indices(p)
	for _, i := range idx {
		d.iso.attempts[i]--
	}
	d.iso.todo = append([][]int{idx}, d.iso.todo...)
}

// detach ends the reader's following of d: a batch of the direct path
// with no part in the pipeline goes back to the queue (its verdict would
// do that otherwise).
func (r *Reader) detach(d *delivery) {
	d.mu.Lock()
	d.attached = false
	idle := d.out == nil && !d.allDone
	d.mu.Unlock()
	if idle && d.ids == nil {
		r.queueRedeliver(d)
	}
}
