package reader

import (
	"github.com/connect-kinesis/connect-kinesis/internal/consumer"
	"github.com/connect-kinesis/connect-kinesis/internal/kpl"
)

// strayMember returns the index of the first user record of an aggregate
// that lies outside the shard's hash key range, or -1 when all lie within
// it. A shard whose range is unknown drops nothing; that is logged once per
// reader, at debug.
func (r *Reader) strayMember(subs []kpl.Record) int {
	h := r.shard.HashRange
	if h == nil {
		if !r.rangeUnknownLogged {
			r.rangeUnknownLogged = true
			r.log.Debug("The shard's hash key range is unknown; aggregated records are not checked against it")
		}
		return -1
	}
	for i, u := range subs {
		if k, ok := consumer.UserHashKey(u); ok && !h.Holds(k) {
			return i
		}
	}
	return -1
}

// dropStray counts and logs a dropped stray aggregate: its user records not
// already covered by the checkpoint it resumes from.
func (r *Reader) dropStray(seq string, subs []kpl.Record, stray int) {
	n := int64(len(subs))
	if r.start.HasSkipSub && seq == r.start.Sequence {
		n = max(0, n-r.start.SkipSub-1)
	}
	r.st.Metrics.Dropped.Incr(n, r.st.Name, consumer.DropOutsideHashRange)
	r.log.Debugf("Dropped aggregated record %s (%d user records): user record %d (partition key %q) lies outside the shard's hash key range, so it is a stray copy written before the producer saw a reshard, and its records were sent again to the right shards",
		seq, n, stray, subs[stray].PartitionKey)
}
