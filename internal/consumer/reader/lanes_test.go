package reader

import (
	"strconv"
	"testing"

	"github.com/connect-kinesis/connect-kinesis/internal/consumer"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestTrackerWithLanesAdvancesOnlyOverContiguousAcks(t *testing.T) {
	tr := newTracker()
	recs := []consumer.Record{
		{Sequence: "1"},
		{Sequence: "2", Aggregated: true, SubSequence: 0},
		{Sequence: "2", Aggregated: true, SubSequence: 1, LastOfAggregate: true},
		{Sequence: "3"},
		{Sequence: "4"},
	}
	first := tr.addRecords(recs)
	id := func(i int) uint64 { return first + uint64(i) }

	// Lane B finishes first: records 3 and 4 wait behind the gap.
	tr.ackAll([]uint64{id(3), id(4)})
	_, _, ok := tr.checkpoint()
	assert.False(t, ok, "acks behind a gap move nothing")

	// Lane A acks record 1 and the first user record of aggregate 2.
	tr.ackAll([]uint64{id(0), id(1)})
	pos, _, ok := tr.checkpoint()
	require.True(t, ok)
	assert.Equal(t, consumer.Position{Sequence: "2", SubSequence: 0, HasSub: true}, pos, "the checkpoint stops inside the aggregate")
	assert.Equal(t, 3, tr.pending())

	tr.ackAll([]uint64{id(2)})
	pos, _, _ = tr.checkpoint()
	assert.Equal(t, consumer.Position{Sequence: "4"}, pos, "the gap closed: everything up to the last record")
	assert.Zero(t, tr.pending())
}

func TestLaneOfSpreadsKeysAndKeepsEachKeyInOneLane(t *testing.T) {
	counts := make([]int, 8)
	for i := range 8000 {
		counts[laneOf("key-"+strconv.Itoa(i), 8)]++
	}
	for l, n := range counts {
		assert.InDelta(t, 1000, n, 200, "lane %d", l)
	}
	assert.Equal(t, laneOf("orders-42", 8), laneOf("orders-42", 8))
}
