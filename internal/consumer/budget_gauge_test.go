package consumer

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// The held-bytes gauge follows every grant, also when the queue stops at
// a head that does not fit (issue 33, item 10). Before the fix the grant
// loop returned early without setting it: the gauge said 40 while the
// budget held 90.
func TestBudgetGaugeFollowsPartialGrants(t *testing.T) {
	b := newBudget(100, newMetrics(testMetrics(t)))
	b.charge(100)
	w1, w2 := b.enqueue(50, 10), b.enqueue(50, 50)
	b.giveBack(60) // w1 gets its 50; w2 does not fit in the 10 left
	<-w1.ready
	held, waiting, _ := b.state()
	assert.Equal(t, int64(90), held)
	assert.Equal(t, 1, waiting)
	v, _ := testGauges.get(MetricBufferedBytes + "{}")
	assert.Equal(t, int64(90), v, "kinesis_input_buffered_bytes")
	b.cancel(w2)
}

// A reader that ends gives back what it holds itself, but a batch still
// in the pipeline stays charged until it is acked (issue 33, item 6): its
// records are in memory until then. Before the fix close gave back
// everything (held 0 with the batch unacked), and the later ack did
// nothing.
func TestBudgetKeepsPipelineBatchesChargedAfterClose(t *testing.T) {
	for _, verdict := range []string{"ack", "nack"} {
		t.Run(verdict, func(t *testing.T) {
			b := newBudget(1<<20, newMetrics(nil))
			s := newShardBudget(b, 10, false)
			require.NoError(t, s.reserve(t.Context()))
			recs := []Record{{Data: make([]byte, 1000), PartitionKey: "k", Sequence: "1"}, {Data: make([]byte, 1000), PartitionKey: "k", Sequence: "2"}}
			s.settle(recs, nil, 1)
			// recs[0] is in the pipeline, recs[1] still with the reader.
			batch := &Batch{Records: recs[:1]}
			batch.charge.Store(recordsCost(recs[:1]))
			s.handedOver(batch)
			s.close()
			held, _, _ := b.state()
			assert.Equal(t, recordsCost(recs[:1]), held, "the batch in the pipeline stays charged")
			if verdict == "ack" {
				s.release(batch)
			} else {
				s.returned(batch) // nobody sends it again: given back
			}
			held, _, _ = b.state()
			assert.Equal(t, int64(0), held, "its verdict gives it back")
		})
	}
}

// The pipeline may ack a batch before the reader notes it handed over (the
// send on Consumer.Next returns, the ack comes, then handedOver runs).
// Before the fix the ack took the batch's charge out of inPipeline and
// handedOver added nothing back, so close gave back the batch twice: held
// ended at minus the batch's cost (CI saw -262920 in
// TestBudgetBoundsWhatShardsHold).
func TestBudgetAckBeforeHandedOverGivesBackOnce(t *testing.T) {
	b := newBudget(1<<20, newMetrics(nil))
	s := newShardBudget(b, 10, false)
	require.NoError(t, s.reserve(t.Context()))
	recs := []Record{{Data: make([]byte, 1000), PartitionKey: "k", Sequence: "1"}, {Data: make([]byte, 1000), PartitionKey: "k", Sequence: "2"}}
	s.settle(recs, nil, 1)
	batch := &Batch{Records: recs}
	batch.charge.Store(recordsCost(recs))
	s.release(batch) // the ack, first
	s.handedOver(batch)
	s.close()
	held, _, _ := b.state()
	assert.Equal(t, int64(0), held, "every byte is given back, once")
}
