package reader

import (
	"sync"
	"time"

	"github.com/connect-kinesis/connect-kinesis/internal/consumer"
	"github.com/connect-kinesis/connect-kinesis/internal/consumer/budget"
)

// delivery is a batch this reader handed to the pipeline, as the reader
// follows it: its tracker entries, its charge in the byte budget, and,
// once it failed, what the reader knows of each record while it sends the
// batch again in parts (isolation, isolate.go). The pipeline sees only
// batch (or a part's batch), whose Ack and Admit come back here
// (consumer.Delivery).
type delivery struct {
	batch consumer.Batch
	r     *Reader
	id    uint64
	// ids are the tracker entries of a lane batch, one per record; a
	// batch of the reader's own path has one entry, id.
	ids []uint64
	// verdict is signalled once a verdict on the part in the pipeline was
	// applied, while the reader is attached (sends the batch itself and
	// waits for it).
	verdict chan struct{}
	// charge is what the batch's records cost the input's byte budget,
	// given back once, when every record of it is done.
	charge budget.Charge
	// at is when the batch was first handed over.
	at time.Time
	// whole is the part that is the whole batch (batch itself).
	whole part

	mu sync.Mutex
	// attached says the reader waits for the verdicts itself; a verdict
	// on a batch not attached queues it for redelivery (direct path).
	attached bool
	// out is the part in the pipeline, nil when none is.
	out *part
	// last is what the last verdict did.
	last outcome
	// allDone says every record of the batch is done.
	allDone bool
	// delivered says the batch reached the pipeline once (its records
	// were counted as delivered).
	delivered bool
	// iso is nil until the batch first failed or was refused.
	iso *isolation
}

// part is what one hand-over of a delivery carries: the whole batch, or
// some of its records (indices into it, ascending).
type part struct {
	d     *delivery
	idx   []int // nil: every record
	batch *consumer.Batch
}

// newDelivery is a batch of recs about to be handed over.
func (r *Reader) newDelivery(recs []consumer.Record, behind int64) *delivery {
	d := &delivery{r: r, verdict: make(chan struct{}, 1)}
	d.batch = consumer.MakeBatch(r.st.Name, r.shard.ID, recs, behind, d)
	d.batch.DeliveredBefore = r.deliveredBefore()
	d.whole = part{d: d, batch: &d.batch}
	d.charge.Set(budget.RecordsCost(recs))
	return d
}

// records are the batch's records.
func (d *delivery) records() []consumer.Record { return d.batch.Records }

// Ack reports the pipeline's verdict on the whole batch. A nil err advances
// the checkpoint (once every earlier batch is acked too); an error makes
// the reader send the batch again.
func (d *delivery) Ack(err error) { d.settle(&d.whole, verdict{err: err}) }

// AckRecords reports a verdict per record of the whole batch.
func (d *delivery) AckRecords(errs []error) { d.settle(&d.whole, verdict{errs: errs}) }

// Admit refuses a batch whose lease was lost (an operator's reset, a
// recreated stream, a re-seed finding the shard taken: a reader's send and
// its ending can both be ready at once) or passed its local deadline while
// the batch waited for the pipeline (the process was paused). A refused
// batch goes back to the reader, which hands it over again once a renewal
// confirms the lease, or drops it when the lease is lost.
func (d *delivery) Admit() bool { return d.whole.Admit() }

// Ack, AckRecords and Admit of a part's batch.
func (p *part) Ack(err error)           { p.d.settle(p, verdict{err: err}) }
func (p *part) AckRecords(errs []error) { p.d.settle(p, verdict{errs: errs}) }
func (p *part) Admit() bool {
	r := p.d.r
	if !r.lost.Load() && r.LeaseLive() {
		r.countRedelivered(p.batch)
		return true
	}
	p.d.settle(p, verdict{bounced: true})
	return false
}

// settle applies a verdict on part p: the records it names done count for
// the checkpoint, the others are charged, halved or queued for the dead
// letter (isolate.go). An attached reader is told; a batch that is not
// attached and still has records to send is queued for redelivery.
func (d *delivery) settle(p *part, v verdict) {
	r := d.r
	d.mu.Lock()
	if d.out != p {
		// A verdict on a part no longer in the pipeline: the charge is
		// where the part's first verdict left it.
		d.mu.Unlock()
		return
	}
	d.out = nil
	if v.ok() && d.iso == nil {
		// The common case: a batch acked on its first delivery.
		attached := d.attached
		d.last, d.allDone = outcomeDone, true
		d.mu.Unlock()
		r.processed.note(time.Now())
		d.finish()
		d.tell(attached)
		return
	}
	if !v.bounced || refusedReturned() {
		r.budget.Returned(&d.charge)
	}
	d.last = d.apply(p, v)
	finished := d.iso.left == 0
	d.allDone = finished
	attached := d.attached
	d.mu.Unlock()
	if finished {
		d.finish()
	}
	if d.tell(attached) || finished || d.ids != nil {
		return
	}
	r.queueRedeliver(d)
}

// tell wakes the reader waiting for a verdict, if attached.
func (d *delivery) tell(attached bool) bool {
	if attached {
		select {
		case d.verdict <- struct{}{}:
		default:
		}
	}
	return attached
}

// finish gives back the batch's charge once every record of it is done,
// and folds it into the tracker when no part did.
func (d *delivery) finish() {
	r := d.r
	if d.iso == nil {
		if d.ids != nil {
			r.tracker.ackAll(d.ids)
		} else {
			r.tracker.ack(d.id)
		}
	}
	r.budget.Release(&d.charge)
	r.isolationEnded(d)
}

// countRedelivered counts the records of b that reach the pipeline marked
// kinesis_redelivered, by cause: counted where the batch is admitted, so
// the metric and the metadata count the same deliveries (a batch Admit
// refuses reaches nobody).
func (r *Reader) countRedelivered(b *consumer.Batch) {
	if b.Attempts == nil && b.DeliveredBefore.IsZero() {
		return
	}
	var nack, mark int64
	for i := range b.Records {
		switch b.RedeliveryCause(i) {
		case consumer.RedeliveredNack:
			nack++
		case consumer.RedeliveredMark:
			mark++
		}
	}
	if nack > 0 {
		r.st.Metrics.Redelivered.Incr(nack, r.st.Name, r.shard.ID, consumer.RedeliveredNack)
	}
	if mark > 0 {
		r.st.Metrics.Redelivered.Incr(mark, r.st.Name, r.shard.ID, consumer.RedeliveredMark)
	}
}
