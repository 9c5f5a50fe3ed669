package consumer

import (
	"context"
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

// resolveStart decides where a newly taken shard starts: after its
// checkpoint, else at the operator's start override, else at the
// configured start_position. A store error is returned, never read as "no
// checkpoint".
func (co *coordinator) resolveStart(ctx context.Context, s Shard) (startSpec, error) {
	pos, ok, err := co.store.Checkpoint(ctx, s.ID)
	if err != nil {
		return startSpec{}, fmt.Errorf("reading the checkpoint: %w", err)
	}
	if ok {
		return startAfter(pos), nil
	}
	start, ts := co.c.cfg.StartPosition, co.c.cfg.StartTimestamp
	o, has, err := co.store.StartOverride(ctx)
	if err != nil {
		return startSpec{}, fmt.Errorf("reading the start override: %w", err)
	}
	if has {
		start, ts = o.Mode, o.Timestamp
	}
	return co.startAt(s, start, ts), nil
}

// startAfter is the start right after a checkpoint.
func startAfter(pos Position) startSpec {
	switch {
	case pos.ShardEnd:
		return startSpec{closeUnread: true}
	case pos.HasSub:
		return startSpec{iterType: types.ShardIteratorTypeAtSequenceNumber, sequence: pos.Sequence, skipSub: pos.SubSequence, hasSkipSub: true}
	}
	return after(pos.Sequence)
}

// startAt is the start of a shard without a checkpoint.
func (co *coordinator) startAt(s Shard, start string, ts time.Time) startSpec {
	switch start {
	case StartAtTimestamp:
		return startSpec{iterType: types.ShardIteratorTypeAtTimestamp, timestamp: ts}
	case StartLatest:
		// `latest` applies to the shards open when the group first meets
		// the stream: they start at LATEST, and shards already closed then
		// are closed unread. A shard that opened later (a child of a shard
		// this group read) is read from its start, so nothing written to it
		// is lost.
		if s.Closed {
			return startSpec{closeUnread: true}
		}
		if !co.initialOpen[s.ID] && hasListedParent(co.listed, s) {
			return startSpec{iterType: types.ShardIteratorTypeTrimHorizon}
		}
		return startSpec{iterType: types.ShardIteratorTypeLatest}
	}
	return startSpec{iterType: types.ShardIteratorTypeTrimHorizon}
}

// noteFirstLook records, once, whether the group meets this stream for the
// first time (no checkpoint, nothing closed) and if so which shards are
// open now: those are the ones `latest` reads from now on. It reports false
// when the store could not say, and the balancing round is skipped.
func (co *coordinator) noteFirstLook(ctx context.Context, closed map[string]bool) bool {
	if co.freshChecked || len(co.listed) == 0 {
		return true
	}
	cps, err := co.store.Checkpoints(ctx)
	if err != nil {
		co.log.Warnf("Reading checkpoints failed: %v", err)
		return false
	}
	co.freshChecked = true
	if len(cps) == 0 && len(closed) == 0 {
		co.initialOpen = map[string]bool{}
		for id, s := range co.listed {
			if !s.Closed {
				co.initialOpen[id] = true
			}
		}
	}
	return true
}
