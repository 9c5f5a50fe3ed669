package checkpointer

import (
	"context"
	"fmt"
	"strings"

	"github.com/connect-kinesis/connect-kinesis/internal/consumer"
)

// snapshotScript: KEYS ckpt, closed, delivered. Returns {ckpt HGETALL,
// closed SMEMBERS, delivered HGETALL}.
var snapshotScript = newScript("snapshot")

// Snapshot is the group's state on the stream at one moment: what an
// export holds and a reset from it puts back.
type Snapshot struct {
	Checkpoints map[string]consumer.Position
	Closed      map[string]bool
	// Start is the start override; nil when none.
	Start       *consumer.StartOverride
	ShardStarts map[string]consumer.StartOverride
	Delivered   map[string]consumer.Position
}

// Snapshot reads checkpoints, the closed set, the start override, the
// per-shard starts and the redelivery marks in one script call, so a shard
// that closes meanwhile is either wholly before (open, its checkpoint as it
// was) or wholly after (SHARD_END and closed), never closed with an older
// checkpoint or the other way round.
func (s *Store) Snapshot(ctx context.Context) (Snapshot, error) {
	const what = "reading the group's state"
	out, err := snapshotScript.Run(ctx, s.c.client, []string{s.keys.Checkpoints, s.keys.Closed, s.keys.Delivered}).Slice()
	if err != nil {
		return Snapshot{}, fmt.Errorf("%s: %w", what, err)
	}
	if len(out) != 3 {
		return Snapshot{}, fmt.Errorf("%s: unexpected script reply of %d parts", what, len(out))
	}
	snap := Snapshot{Checkpoints: map[string]consumer.Position{}, Closed: map[string]bool{},
		ShardStarts: map[string]consumer.StartOverride{}, Delivered: map[string]consumer.Position{}}
	ckpt, closed, delivered := toStrings(out[0]), toStrings(out[1]), toStrings(out[2])
	for i := 0; i+1 < len(ckpt); i += 2 {
		field, v := ckpt[i], ckpt[i+1]
		switch shard, isStart := strings.CutPrefix(field, shardStartPrefix); {
		case field == startField:
			o, err := consumer.ParseStartOverride(v)
			if err != nil {
				return Snapshot{}, fmt.Errorf("%s: the start override: %w", what, err)
			}
			snap.Start = &o
		case isStart:
			o, err := consumer.ParseStartOverride(v)
			if err != nil {
				return Snapshot{}, fmt.Errorf("%s: the start of shard %s: %w", what, shard, err)
			}
			snap.ShardStarts[shard] = o
		case strings.HasPrefix(field, "_"):
			// Not a shard: no shard id begins with '_'.
		default:
			p, err := consumer.ParsePosition(v)
			if err != nil {
				return Snapshot{}, fmt.Errorf("%s: the checkpoint of shard %s: %w", what, field, err)
			}
			snap.Checkpoints[field] = p
		}
	}
	for _, shard := range closed {
		snap.Closed[shard] = true
	}
	for i := 0; i+1 < len(delivered); i += 2 {
		p, err := consumer.ParsePosition(delivered[i+1])
		if err != nil {
			return Snapshot{}, fmt.Errorf("%s: the delivered position of shard %s: %w", what, delivered[i], err)
		}
		snap.Delivered[delivered[i]] = p
	}
	return snap, nil
}

// toStrings converts a script's array reply of strings.
func toStrings(v any) []string {
	items, _ := v.([]any)
	out := make([]string, 0, len(items))
	for _, it := range items {
		out = append(out, toString(it))
	}
	return out
}
