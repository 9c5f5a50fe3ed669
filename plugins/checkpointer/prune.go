package checkpointer

import (
	"context"
	"fmt"
	"strings"

	"github.com/connect-kinesis/connect-kinesis/internal/consumer"
)

// pruneScript: KEYS epoch, ckpt, closed, lease, progress, handoff, delivered; ARGV
// knownEpoch (empty to skip the check), shard... Removes each shard's entries
// from every key unless its lease is live; returns the shards pruned.
var pruneScript = newScript("prune")

// Prune removes every entry of shards the stream no longer lists (trimmed
// past the retention period): checkpoint, closed mark, lease, published
// progress, hand-off request and redelivery mark, in one script. A shard whose lease is
// live is kept (a reader may still drain it). The consumer decides which
// shards are safe to prune (prune.go there); this only deletes.
func (s *Store) Prune(ctx context.Context, shards []string) ([]string, error) {
	if len(shards) == 0 {
		return nil, nil
	}
	args := make([]any, 0, 1+len(shards))
	args = append(args, s.knownEpoch())
	for _, id := range shards {
		args = append(args, id)
	}
	what := fmt.Sprintf("pruning %d shards the stream no longer lists", len(shards))
	pruned, err := pruneScript.Run(ctx, s.c.client,
		[]string{s.keys.Epoch, s.keys.Checkpoints, s.keys.Closed, s.keys.Leases, s.keys.Progress, s.keys.Handoff, s.keys.Delivered}, args...).StringSlice()
	if err != nil {
		return nil, storeErr(what, err)
	}
	s.marks.forget(pruned...)
	return pruned, nil
}

// CheckpointedShards lists the shards the store holds a checkpoint or a
// shard start of (one HKEYS of the checkpoint hash), so that the consumer
// can prune those nobody ever leased: a reset or an import writes them
// for every shard it names (consumer.CheckpointLister).
func (s *Store) CheckpointedShards(ctx context.Context) ([]string, error) {
	fields, err := s.c.client.HKeys(ctx, s.keys.Checkpoints).Result()
	if err != nil {
		return nil, fmt.Errorf("listing the shards with a checkpoint: %w", err)
	}
	seen := map[string]bool{}
	var out []string
	for _, f := range fields {
		id, _ := strings.CutPrefix(f, shardStartPrefix)
		if f == startField || id == "" || seen[id] {
			continue
		}
		seen[id] = true
		out = append(out, id)
	}
	return out, nil
}

var _ consumer.CheckpointLister = (*Store)(nil)
