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

// hashKey is a 128-bit hash key, big-endian, so bytes.Compare orders it
// like the number.
type hashKey [16]byte

// hashRange is a shard's hash key range, both ends included. The bounds
// are parsed once, when the shard is listed, so the check per user record
// is one MD5 of its partition key and two byte comparisons.
type hashRange struct{ start, end hashKey }

// hashRangeOf reads a listed shard's range; nil when the listing gives
// none or it does not parse (the reader then drops nothing).
func hashRangeOf(r *types.HashKeyRange) *hashRange {
	if r == nil {
		return nil
	}
	start, ok1 := parseHashKey(aws.ToString(r.StartingHashKey))
	end, ok2 := parseHashKey(aws.ToString(r.EndingHashKey))
	if !ok1 || !ok2 {
		return nil
	}
	return &hashRange{start: start, end: end}
}

// holds reports whether k lies within the range.
func (h *hashRange) holds(k hashKey) bool {
	return bytes.Compare(k[:], h.start[:]) >= 0 && bytes.Compare(k[:], h.end[:]) <= 0
}

// userHashKey is where Kinesis would put a user record written on its own:
// its explicit hash key, else the MD5 of its partition key. ok is false
// for an explicit hash key that is not a 128-bit decimal (it is then kept:
// a record is dropped only when it is known to be elsewhere).
func userHashKey(r kpl.Record) (hashKey, bool) {
	if r.ExplicitHashKey != "" {
		return parseHashKey(r.ExplicitHashKey)
	}
	return md5.Sum([]byte(r.PartitionKey)), true
}

func parseHashKey(s string) (hashKey, bool) {
	var k hashKey
	n, ok := new(big.Int).SetString(s, 10)
	if !ok || n.Sign() < 0 || n.BitLen() > 128 {
		return k, false
	}
	n.FillBytes(k[:])
	return k, true
}

// strayMember returns the index of the first user record of an aggregate
// that lies outside the shard's hash key range, or -1 when all lie within
// it. A shard whose range is unknown drops nothing; that is logged once per
// reader, at debug.
func (r *shardReader) strayMember(subs []kpl.Record) int {
	h := r.shard.HashRange
	if h == nil {
		if !r.rangeUnknownLogged {
			r.rangeUnknownLogged = true
			r.log.Debug("The shard's hash key range is unknown; aggregated records are not checked against it")
		}
		return -1
	}
	for i, u := range subs {
		if k, ok := userHashKey(u); ok && !h.holds(k) {
			return i
		}
	}
	return -1
}

// dropStray counts and logs a dropped stray aggregate: its user records not
// already covered by the checkpoint it resumes from.
func (r *shardReader) dropStray(seq string, subs []kpl.Record, stray int) {
	n := int64(len(subs))
	if r.start.hasSkipSub && seq == r.start.sequence {
		n = max(0, n-r.start.skipSub-1)
	}
	r.co.c.metrics.dropped.Incr(n, r.co.streamName, DropOutsideHashRange)
	r.log.Debugf("Dropped aggregated record %s (%d user records): user record %d (partition key %q) lies outside the shard's hash key range, so it is a stray copy written before the producer saw a reshard, and its records were sent again to the right shards",
		seq, n, stray, subs[stray].PartitionKey)
}
