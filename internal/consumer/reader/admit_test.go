package reader

import (
	"testing"
	"time"

	"github.com/connect-kinesis/connect-kinesis/internal/consumer"
	"github.com/connect-kinesis/connect-kinesis/internal/consumer/consumertest"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// Admit lets through no batch of a reader whose lease was lost while its
// deadline was still ahead (an operator's reset, a recreated stream, a
// re-seed that found the shard taken): the reader's send and its ending
// can both be ready.
func TestAdmitRefusesABatchOfALostReader(t *testing.T) {
	r := pastDeadlineReader(t, consumertest.NewStore(time.Minute), "s")
	l := r.Lease()
	l.Deadline = time.Now().Add(time.Hour)
	r.LeaseRenewed(l)
	d := r.newDelivery([]consumer.Record{{Sequence: "1"}}, 0)
	require.True(t, d.batch.Admit(), "a batch of a live lease is admitted")
	r.MarkLost()
	d = r.newDelivery([]consumer.Record{{Sequence: "2"}}, 0)
	assert.False(t, d.batch.Admit(), "a batch of a lost lease was handed over")
}
