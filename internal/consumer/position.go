package consumer

import (
	"fmt"
	"strconv"
	"strings"
)

// ShardEnd is the checkpoint of a shard read to its end and fully committed.
const ShardEnd = "SHARD_END"

// Position is a checkpoint value: "<seq>", "<seq>/<subseq>" or "SHARD_END".
//
// "<seq>" means the whole record <seq> (every user record of it, when it is a
// KPL aggregate) is done; "<seq>/<subseq>" means user records 0..subseq of the
// aggregated record <seq> are done. So for one sequence number "<seq>" is past
// every "<seq>/<n>", and a consumer resumes AFTER_SEQUENCE_NUMBER <seq> for the
// first and AT_SEQUENCE_NUMBER <seq>, skipping sub-records <= subseq, for the
// second.
type Position struct {
	Sequence    string
	SubSequence int64
	HasSub      bool
	ShardEnd    bool
}

// ParsePosition parses a checkpoint value.
func ParsePosition(s string) (Position, error) {
	if s == ShardEnd {
		return Position{ShardEnd: true}, nil
	}
	seq, sub, hasSub := strings.Cut(s, "/")
	if !isDecimal(seq) {
		return Position{}, fmt.Errorf("parsing checkpoint %q: want <sequence>, <sequence>/<sub-sequence> or %s", s, ShardEnd)
	}
	p := Position{Sequence: seq}
	if hasSub {
		n, err := strconv.ParseInt(sub, 10, 64)
		if err != nil || n < 0 || !isDecimal(sub) {
			return Position{}, fmt.Errorf("parsing checkpoint %q: the sub-sequence after '/' must be a non-negative integer", s)
		}
		p.SubSequence, p.HasSub = n, true
	}
	return p, nil
}

// String is the value stored in Redis.
func (p Position) String() string {
	switch {
	case p.ShardEnd:
		return ShardEnd
	case p.HasSub:
		return p.Sequence + "/" + strconv.FormatInt(p.SubSequence, 10)
	default:
		return p.Sequence
	}
}

// IsZero reports whether p is the zero Position (no checkpoint).
func (p Position) IsZero() bool { return p == Position{} }

// Compare returns -1, 0 or 1 as p is before, equal to or after q. Sequence
// numbers are compared as big decimal integers (they exceed 64 bits), then
// sub-sequences; a whole record is after each of its sub-records, and
// SHARD_END after everything. The Lua scripts implement the same order.
func (p Position) Compare(q Position) int {
	switch {
	case p.ShardEnd && q.ShardEnd:
		return 0
	case p.ShardEnd:
		return 1
	case q.ShardEnd:
		return -1
	}
	if c := compareDecimal(p.Sequence, q.Sequence); c != 0 {
		return c
	}
	switch {
	case !p.HasSub && !q.HasSub:
		return 0
	case !p.HasSub:
		return 1
	case !q.HasSub:
		return -1
	case p.SubSequence < q.SubSequence:
		return -1
	case p.SubSequence > q.SubSequence:
		return 1
	}
	return 0
}

// compareDecimal compares non-negative decimal strings of any length.
func compareDecimal(a, b string) int {
	a, b = strings.TrimLeft(a, "0"), strings.TrimLeft(b, "0")
	if len(a) != len(b) {
		if len(a) < len(b) {
			return -1
		}
		return 1
	}
	return strings.Compare(a, b)
}

func isDecimal(s string) bool {
	if s == "" {
		return false
	}
	for i := 0; i < len(s); i++ {
		if s[i] < '0' || s[i] > '9' {
			return false
		}
	}
	return true
}
