package consumer

import (
	"testing"

	"github.com/stretchr/testify/assert"
)

// Guards issue 59 item 8: Redelivered compares a record's first position
// with the redelivery mark, so a KPL aggregate read whole (deaggregate
// off, or an aggregate that does not decode) is marked when any of its
// user records was delivered: under the mark 100/3 it was, in part.
func TestRedeliveredComparesARecordsFirstPosition(t *testing.T) {
	mark := Position{Sequence: "100", SubSequence: 3, HasSub: true}
	whole := Record{Sequence: "100"}
	sub := func(i int64, last bool) Record {
		return Record{Sequence: "100", SubSequence: i, Aggregated: true, LastOfAggregate: last}
	}
	for _, tc := range []struct {
		name string
		rec  Record
		mark Position
		want bool
	}{
		{"an aggregate read whole under 100/3", whole, mark, true},
		{"a user record delivered under 100/3", sub(3, false), mark, true},
		{"the user record after 100/3", sub(4, false), mark, false},
		{"the last user record after 100/3", sub(4, true), mark, false},
		{"the last user record under 100", sub(4, true), Position{Sequence: "100"}, true},
		{"a record read whole under 100", whole, Position{Sequence: "100"}, true},
		{"a record read whole under 99", whole, Position{Sequence: "99"}, false},
		{"the next record under 100/3", Record{Sequence: "101"}, mark, false},
	} {
		b := Batch{Records: []Record{tc.rec}, DeliveredBefore: tc.mark}
		assert.Equal(t, tc.want, b.Redelivered(0), tc.name)
	}
}
