package reader

import (
	"testing"

	"github.com/connect-kinesis/connect-kinesis/internal/consumer"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestTrackerCheckpointOnlyMovesOverContiguousAcks(t *testing.T) {
	tr := newTracker()
	ids := make([]uint64, 5)
	for i := range ids {
		ids[i] = tr.add(consumer.Position{Sequence: string(rune('1' + i))})
	}
	for _, i := range []int{2, 1, 4} {
		tr.ack(ids[i])
	}
	_, _, ok := tr.checkpoint()
	assert.False(t, ok, "batch 1 is unacked: no checkpoint yet")
	assert.Equal(t, 5, tr.pending())

	tr.ack(ids[0])
	p, _, ok := tr.checkpoint()
	require.True(t, ok)
	assert.Equal(t, "3", p.Sequence, "the run 1..3 is contiguous; 4 is still missing")
	assert.Equal(t, 2, tr.pending())

	tr.ack(ids[3])
	p, _, _ = tr.checkpoint()
	assert.Equal(t, "5", p.Sequence)
	assert.Zero(t, tr.pending())
}
