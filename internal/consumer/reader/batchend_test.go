package reader

import (
	"strings"
	"testing"
	"unsafe"

	"github.com/connect-kinesis/connect-kinesis/internal/consumer"
	"github.com/stretchr/testify/assert"
)

// TestBatchEndKeepsItsOwnSequence: the position an ack allows outlives its
// batch (tracker, commit, re-seed state), so it must not share memory with
// the batch's records, whose strings may be one allocation with the whole
// answer's keys and sequence numbers (the records codec): a kept slice of
// it would hold all of them.
func TestBatchEndKeepsItsOwnSequence(t *testing.T) {
	answer := strings.Repeat("x", 1<<20) + "49590338271490256608559692538361571095921575989136588898"
	seq := answer[1<<20:]
	for _, rec := range []consumer.Record{
		{Sequence: seq},
		{Sequence: seq, Aggregated: true, SubSequence: 3},
	} {
		pos := batchEnd([]consumer.Record{rec})
		assert.Equal(t, seq, pos.Sequence)
		assert.NotSame(t, unsafe.StringData(seq), unsafe.StringData(pos.Sequence), "the position's sequence is a copy")
	}
}
