package budget

import (
	"testing"

	"github.com/connect-kinesis/connect-kinesis/internal/consumer"
	"github.com/connect-kinesis/connect-kinesis/internal/consumer/consumertest"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// The held-bytes gauge follows every grant, also when the queue stops at
// a head that does not fit (issue 33, item 10). Before the fix the grant
// loop returned early without setting it: the gauge said 40 while the
// budget held 90.
func TestBudgetGaugeFollowsPartialGrants(t *testing.T) {
	b := New(100, consumer.NewMetrics(consumertest.Metrics(t)))
	b.charge(100)
	w1, w2 := b.enqueue(50, 10), b.enqueue(50, 50)
	b.giveBack(60) // w1 gets its 50; w2 does not fit in the 10 left
	<-w1.ready
	held, waiting, _ := b.State()
	assert.Equal(t, int64(90), held)
	assert.Equal(t, 1, waiting)
	v, _ := consumertest.Gauges.Get(consumer.MetricBufferedBytes + "{}")
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
			b := New(1<<20, consumer.NewMetrics(nil))
			s := NewShard(b, 10, false, nil, "")
			require.NoError(t, s.Reserve(t.Context()))
			recs := []consumer.Record{{Data: make([]byte, 1000), PartitionKey: "k", Sequence: "1"}, {Data: make([]byte, 1000), PartitionKey: "k", Sequence: "2"}}
			s.Settle(recs, nil, 1)
			// recs[0] is in the pipeline, recs[1] still with the reader.
			batch := &Charge{}
			batch.Set(RecordsCost(recs[:1]))
			s.HandedOver(batch)
			s.Close()
			held, _, _ := b.State()
			assert.Equal(t, RecordsCost(recs[:1]), held, "the batch in the pipeline stays charged")
			if verdict == "ack" {
				s.Release(batch)
			} else {
				s.Returned(batch) // nobody sends it again: given back
			}
			held, _, _ = b.State()
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
	b := New(1<<20, consumer.NewMetrics(nil))
	s := NewShard(b, 10, false, nil, "")
	require.NoError(t, s.Reserve(t.Context()))
	recs := []consumer.Record{{Data: make([]byte, 1000), PartitionKey: "k", Sequence: "1"}, {Data: make([]byte, 1000), PartitionKey: "k", Sequence: "2"}}
	s.Settle(recs, nil, 1)
	batch := &Charge{}
	batch.Set(RecordsCost(recs))
	s.Release(batch) // the ack, first
	s.HandedOver(batch)
	s.Close()
	held, _, _ := b.State()
	assert.Equal(t, int64(0), held, "every byte is given back, once")
}
