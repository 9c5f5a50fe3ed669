package consumer

import (
	"bytes"
	"crypto/md5"
	"math/big"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/kinesis/types"

	"github.com/connect-kinesis/connect-kinesis/internal/kpl"
)

// A producer that has not yet seen a split may write an aggregated record
// whose user records belong to both children. It lands on one of them; a
// careful producer (ours, KPL) sees that and sends all its members again,
// grouped by the new shards. The copy left behind is a stray: delivering
// any of it would deliver its records twice, and those of the other child
// possibly after later records of the same key read from that child. As
// KCL does (its de-aggregation drops every user record of an aggregate as
// soon as one lies outside the shard's range), the reader drops the whole
// aggregate when one of its user records has a hash key outside its
// shard's hash key range, and counts its user records
// (kinesis_input_records_dropped_total{reason="outside_hash_range"}).
// Plain records are never checked: Kinesis placed them by their own key.

// DropOutsideHashRange is the reason label of a user record dropped because
// its hash key lies outside its shard's range.
const DropOutsideHashRange = "outside_hash_range"

// HashKey is a 128-bit hash key, big-endian, so bytes.Compare orders it
// like the number.
type HashKey [16]byte

// HashRange is a shard's hash key range, both ends included. The bounds
// are parsed once, when the shard is listed, so the check per user record
// is one MD5 of its partition key and two byte comparisons.
type HashRange struct{ Start, End HashKey }

// HashRangeOf reads a listed shard's range; nil when the listing gives
// none or it does not parse (the reader then drops nothing).
func HashRangeOf(r *types.HashKeyRange) *HashRange {
	if r == nil {
		return nil
	}
	start, ok1 := ParseHashKey(aws.ToString(r.StartingHashKey))
	end, ok2 := ParseHashKey(aws.ToString(r.EndingHashKey))
	if !ok1 || !ok2 {
		return nil
	}
	return &HashRange{Start: start, End: end}
}

// Holds reports whether k lies within the range.
func (h *HashRange) Holds(k HashKey) bool {
	return bytes.Compare(k[:], h.Start[:]) >= 0 && bytes.Compare(k[:], h.End[:]) <= 0
}

// UserHashKey is where Kinesis would put a user record written on its own:
// its explicit hash key, else the MD5 of its partition key. ok is false
// for an explicit hash key that is not a 128-bit decimal (it is then kept:
// a record is dropped only when it is known to be elsewhere).
func UserHashKey(r kpl.Record) (HashKey, bool) {
	if r.ExplicitHashKey != "" {
		return ParseHashKey(r.ExplicitHashKey)
	}
	return md5.Sum([]byte(r.PartitionKey)), true
}

func ParseHashKey(s string) (HashKey, bool) {
	var k HashKey
	n, ok := new(big.Int).SetString(s, 10)
	if !ok || n.Sign() < 0 || n.BitLen() > 128 {
		return k, false
	}
	n.FillBytes(k[:])
	return k, true
}
