package consumer

import (
	"cmp"
	"fmt"
	"strings"
	"time"

	"github.com/aws/aws-sdk-go-v2/service/kinesis/types"
)

// Start positions for shards without a checkpoint.
const (
	StartTrimHorizon = "trim_horizon"
	StartLatest      = "latest"
	StartAtTimestamp = "at_timestamp"
)

// StartOverride is where shards without a checkpoint begin after an
// operator reset, in place of the input's configured start_position.
type StartOverride struct {
	Mode      string // StartTrimHorizon, StartLatest or StartAtTimestamp
	Timestamp time.Time
}

// String is the stored form: "trim_horizon", "latest" or
// "at_timestamp=<RFC3339Nano>".
func (o StartOverride) String() string {
	if o.Mode == StartAtTimestamp {
		return StartAtTimestamp + "=" + o.Timestamp.UTC().Format(time.RFC3339Nano)
	}
	return o.Mode
}

// ParseStartOverride parses "trim_horizon", "latest" or
// "at_timestamp=<RFC3339>".
func ParseStartOverride(s string) (StartOverride, error) {
	switch {
	case s == StartTrimHorizon || s == StartLatest:
		return StartOverride{Mode: s}, nil
	case strings.HasPrefix(s, StartAtTimestamp+"="):
		ts, err := time.Parse(time.RFC3339Nano, strings.TrimPrefix(s, StartAtTimestamp+"="))
		if err != nil {
			return StartOverride{}, fmt.Errorf("parsing %q: the timestamp must be RFC3339, e.g. at_timestamp=2024-05-01T12:00:00Z", s)
		}
		return StartOverride{Mode: StartAtTimestamp, Timestamp: ts}, nil
	}
	return StartOverride{}, fmt.Errorf("parsing %q: want trim_horizon, latest or at_timestamp=<RFC3339>", s)
}

// LatestSkewMargin is how far before the group's start `latest` begins.
// The group's start is taken by the Redis server's clock, the records'
// arrival times by Kinesis': the margin absorbs a difference between the
// two clocks, so no record written after the group started is skipped. A
// group's very first read may therefore also deliver records written up to
// this long before it started.
const LatestSkewMargin = 5 * time.Second

// resolveStart decides where a newly taken shard starts, from what the take
// read with its lease: after its checkpoint, else at the shard's own start
// (from an import), else at the operator's start override, else at the
// configured start_position. Every position here is
// the same on every take and every instance: `latest` is the group's start
// as stored with its first take (AT_TIMESTAMP, less LatestSkewMargin), so a
// shard without a checkpoint that changes hands skips nothing written
// meanwhile, and a shard that closed before the group started is read from
// there to its end, which is at once.
func (co *coordinator) resolveStart(t Take) startSpec {
	if !t.Checkpoint.IsZero() {
		return startAfter(t.Checkpoint)
	}
	start, ts := co.c.cfg.StartPosition, co.c.cfg.StartTimestamp
	if o := cmp.Or(t.ShardStart, t.Override); o != nil {
		start, ts = o.Mode, o.Timestamp
	}
	switch start {
	case StartAtTimestamp:
		return startSpec{iterType: types.ShardIteratorTypeAtTimestamp, timestamp: ts}
	case StartLatest:
		return startSpec{iterType: types.ShardIteratorTypeAtTimestamp, timestamp: t.GroupStart.Add(-LatestSkewMargin)}
	}
	return startSpec{iterType: types.ShardIteratorTypeTrimHorizon}
}

// startAfter is the start right after a checkpoint. A SHARD_END checkpoint
// of a shard missing from the closed set (a failover lost the second step
// of its close) closes it again without reading it.
func startAfter(pos Position) startSpec {
	switch {
	case pos.ShardEnd:
		return startSpec{closeUnread: true}
	case pos.HasSub:
		return startSpec{iterType: types.ShardIteratorTypeAtSequenceNumber, sequence: pos.Sequence, skipSub: pos.SubSequence, hasSkipSub: true}
	}
	return after(pos.Sequence)
}
