package reader

import (
	"sync/atomic"

	"github.com/connect-kinesis/connect-kinesis/internal/consumer"
	"github.com/connect-kinesis/connect-kinesis/internal/consumer/budget"
)

// delivery is a batch this reader handed to the pipeline, as the reader
// follows it: its tracker entries, its charge in the byte budget, and its
// verdict while it is sent again. The pipeline sees only batch, whose Ack
// and Admit come back here (consumer.Delivery).
type delivery struct {
	batch consumer.Batch
	r     *Reader
	id    uint64
	// ids are the tracker entries of a lane batch, one per record; a
	// batch of the reader's own path has one entry, id.
	ids []uint64
	// redelivering is set while the reader sends the batch again after a
	// nack and waits for the verdict on verdict.
	redelivering atomic.Bool
	verdict      chan error
	// charge is what the batch's records cost the input's byte budget,
	// given back once, when the batch is acked.
	charge budget.Charge
}

// newDelivery is a batch of recs about to be handed over.
func (r *Reader) newDelivery(recs []consumer.Record, behind int64) *delivery {
	d := &delivery{r: r}
	d.batch = consumer.MakeBatch(r.st.Name, r.shard.ID, recs, behind, d)
	d.charge.Set(budget.RecordsCost(recs))
	return d
}

// records are the batch's records.
func (d *delivery) records() []consumer.Record { return d.batch.Records }

// Ack reports the pipeline's verdict. A nil err advances the checkpoint
// (once every earlier batch is acked too); an error makes the reader send
// the batch again.
func (d *delivery) Ack(err error) {
	r := d.r
	if err == nil {
		if d.ids != nil {
			r.tracker.ackAll(d.ids)
		} else {
			r.tracker.ack(d.id)
		}
		r.budget.Release(&d.charge)
	} else {
		r.budget.Returned(&d.charge)
	}
	if d.redelivering.Load() {
		select {
		case d.verdict <- err:
		default:
		}
		return
	}
	if err != nil {
		r.nack(d)
	}
}

// Admit refuses a batch whose lease was lost (an operator's reset, a
// recreated stream, a re-seed finding the shard taken: a reader's send and
// its ending can both be ready at once) or passed its local deadline while
// the batch waited for the pipeline (the process was paused). A refused
// batch goes back to the reader, which hands it over again once a renewal
// confirms the lease, or drops it when the lease is lost.
func (d *delivery) Admit() bool {
	if !d.r.lost.Load() && d.r.LeaseLive() {
		return true
	}
	d.r.bounce(d)
	return false
}
