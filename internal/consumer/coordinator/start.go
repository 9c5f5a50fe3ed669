package coordinator

import (
	"cmp"

	"github.com/aws/aws-sdk-go-v2/service/kinesis/types"
	"github.com/connect-kinesis/connect-kinesis/internal/consumer"
	"github.com/connect-kinesis/connect-kinesis/internal/consumer/source"
)

// resolveStart decides where a newly taken shard starts, from what the take
// read with its lease: after its checkpoint, else at the shard's own start
// (from an import), else at the operator's start override, else at the
// configured start_position. Every position here is
// the same on every take and every instance: `latest` is the group's start
// as stored with its first take (AT_TIMESTAMP, less LatestSkewMargin), so a
// shard without a checkpoint that changes hands skips nothing written
// meanwhile, and a shard that closed before the group started is read from
// there to its end, which is at once.
func (co *coordinator) resolveStart(t consumer.Take) source.Start {
	if !t.Checkpoint.IsZero() {
		return startAfter(t.Checkpoint)
	}
	start, ts := co.start, co.c.cfg.StartTimestamp
	if o := cmp.Or(t.ShardStart, t.Override); o != nil {
		start, ts = o.Mode, o.Timestamp
	}
	switch start {
	case consumer.StartAtTimestamp:
		return source.Start{IterType: types.ShardIteratorTypeAtTimestamp, Timestamp: ts}
	case consumer.StartLatest:
		return source.Start{IterType: types.ShardIteratorTypeAtTimestamp, Timestamp: t.GroupStart.Add(-consumer.LatestSkewMargin)}
	}
	return source.Start{IterType: types.ShardIteratorTypeTrimHorizon}
}

// startAfter is the start right after a checkpoint. A SHARD_END checkpoint
// of a shard missing from the closed set (a failover lost the second step
// of its close) closes it again without reading it.
func startAfter(pos consumer.Position) source.Start {
	switch {
	case pos.ShardEnd:
		return source.Start{CloseUnread: true}
	case pos.HasSub:
		return source.Start{IterType: types.ShardIteratorTypeAtSequenceNumber, Sequence: pos.Sequence, SkipSub: pos.SubSequence, HasSkipSub: true}
	}
	return source.After(pos.Sequence)
}
