package budget

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/connect-kinesis/connect-kinesis/internal/consumer"
)

// Guards the reading of issue 59 that Returned after Close gives a charge
// back twice: a nacked batch is the reader's again (Returned), the reader
// ends (Close gives back what it holds, that batch too), and a second
// Returned on the same charge comes late (a lane that followed the batch
// notes its verdict only after the reader closed). The second must give
// back nothing: Close did.
func TestReturnedAfterCloseGivesNoChargeBackTwice(t *testing.T) {
	b := New(1<<20, consumer.NewMetrics(nil))
	s := NewShard(b, 10, false, nil, "s/0")
	require.NoError(t, s.Reserve(t.Context()))
	recs, raw := records(2, 1000)
	s.Settle(recs, raw, 1)
	batch := &Charge{}
	batch.Set(RecordsCost(recs))
	s.HandedOver(batch)
	s.Returned(batch) // nacked: the reader holds it to send it again
	s.Close()         // the reader ends: nobody will
	require.NoError(t, b.Drained(), "the nacked batch is given back when its reader ends")
	s.Returned(batch)
	s.Release(batch)
	held, _, _ := b.State()
	assert.Equal(t, int64(0), held, "a late Returned or Release gives nothing back twice")
	assert.NoError(t, b.Drained())
}
