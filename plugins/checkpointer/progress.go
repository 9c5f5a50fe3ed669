package checkpointer

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/connect-kinesis/connect-kinesis/internal/consumer"
	"github.com/redis/go-redis/v9"
)

// PublishedProgress is a shard's progress as its owner last published it.
type PublishedProgress struct {
	consumer.Progress
	Owner string
	// LoadKnown is false for a value written by a release that publishes
	// no bytes/s.
	LoadKnown bool
}

// loadMark introduces the trailing bytes/s field of a progress value.
const loadMark = "|bps="

// PublishProgress records the progress of the shards owner reads, in one
// script call; shards whose lease does not name owner are skipped.
func (s *Store) PublishProgress(ctx context.Context, owner string, ps map[string]consumer.Progress) error {
	if len(ps) == 0 {
		return nil
	}
	args := progressArgs([]any{owner}, ps)
	if err := publishProgressScript.Run(ctx, s.c.client, []string{s.keys.Progress, s.keys.Leases}, args...).Err(); err != nil {
		return fmt.Errorf("publishing progress of %d shards for %s: %w", len(ps), owner, err)
	}
	return nil
}

// progressArgs appends each shard's shard, lag, last delivery and bytes/s
// to args, shards sorted.
func progressArgs(args []any, ps map[string]consumer.Progress) []any {
	for _, shard := range slices.Sorted(maps.Keys(ps)) {
		p := ps[shard]
		var last int64
		if !p.LastDelivered.IsZero() {
			last = p.LastDelivered.UnixMilli()
		}
		args = append(args, shard, p.LagMillis, last, p.BytesPerSecond)
	}
	return args
}

// PublishProgressAll publishes, for each of stores (one per stream), the
// progress given at the same index, in one script call where Redis is not
// a Cluster (publish_progresses.lua). In a Cluster, and for a store of
// another Checkpointer or kind, each publishes on its own
// (consumer.ProgressBatcher).
func (s *Store) PublishProgressAll(ctx context.Context, owner string, stores []consumer.Store, ps []map[string]consumer.Progress) []error {
	errs := make([]error, len(stores))
	_, cluster := s.c.client.(*redis.ClusterClient)
	var batch []int
	var keys []string
	args := []any{owner}
	n := 0
	var alone []int
	for i, st := range stores {
		o, ok := st.(*Store)
		if !ok || o.c != s.c || cluster {
			alone = append(alone, i)
			continue
		}
		if len(ps[i]) == 0 {
			continue
		}
		batch, keys = append(batch, i), append(keys, o.keys.Progress, o.keys.Leases)
		args = progressArgs(append(args, len(ps[i])), ps[i])
		n += len(ps[i])
	}
	wait := onTheirOwn(alone, func(i int) { errs[i] = stores[i].PublishProgress(ctx, owner, ps[i]) })
	defer wait()
	if len(batch) == 0 {
		return errs
	}
	if err := publishProgressesScript.Run(ctx, s.c.client, keys, args...).Err(); err != nil {
		for _, i := range batch {
			errs[i] = fmt.Errorf("publishing progress of %d shards in %d streams for %s: %w", n, len(batch), owner, err)
		}
	}
	return errs
}

var _ consumer.ProgressBatcher = (*Store)(nil)

// Progress reads what owners last published, per shard.
func (s *Store) Progress(ctx context.Context) (map[string]PublishedProgress, error) {
	raw, err := s.c.client.HGetAll(ctx, s.keys.Progress).Result()
	if err != nil {
		return nil, fmt.Errorf("reading published progress: %w", err)
	}
	return progressOf(raw)
}

// progressOf reads the progress hash's fields.
func progressOf(raw map[string]string) (map[string]PublishedProgress, error) {
	out := make(map[string]PublishedProgress, len(raw))
	for shard, v := range raw {
		// "<lagMillis>|<lastDeliveredMillis>|<owner>|bps=<bytesPerSecond>";
		// the owner may hold '|'; earlier releases wrote no load field.
		parts := strings.SplitN(v, "|", 3)
		if len(parts) != 3 {
			return nil, fmt.Errorf("reading progress of shard %s: malformed value %q", shard, v)
		}
		lag, err1 := strconv.ParseInt(parts[0], 10, 64)
		last, err2 := strconv.ParseInt(parts[1], 10, 64)
		if err1 != nil || err2 != nil {
			return nil, fmt.Errorf("reading progress of shard %s: malformed value %q", shard, v)
		}
		p := PublishedProgress{Progress: consumer.Progress{LagMillis: lag}, Owner: parts[2]}
		if i := strings.LastIndex(p.Owner, loadMark); i >= 0 {
			if bps, err := strconv.ParseInt(p.Owner[i+len(loadMark):], 10, 64); err == nil {
				p.Owner, p.BytesPerSecond, p.LoadKnown = p.Owner[:i], bps, true
			}
		}
		if last > 0 {
			p.LastDelivered = time.UnixMilli(last)
		}
		out[shard] = p
	}
	return out, nil
}

// ShardLoads reads every shard's published load in one call (the same
// read as Progress), for balancing by load.
func (s *Store) ShardLoads(ctx context.Context) (map[string]consumer.ShardLoad, error) {
	ps, err := s.Progress(ctx)
	if err != nil {
		return nil, err
	}
	return loadsOf(ps), nil
}

func loadsOf(ps map[string]PublishedProgress) map[string]consumer.ShardLoad {
	out := make(map[string]consumer.ShardLoad, len(ps))
	for shard, p := range ps {
		out[shard] = consumer.ShardLoad{BytesPerSecond: p.BytesPerSecond, Known: p.LoadKnown}
	}
	return out
}

// HasState reports whether any key of the group+stream exists: false means
// no pipeline of the group has run against the stream (or it was deleted).
func (s *Store) HasState(ctx context.Context) (bool, error) {
	k := s.keys
	n, err := s.c.client.Exists(ctx, k.Checkpoints, k.Closed, k.Leases, k.Members, k.Handoff, k.Progress, k.Delivered).Result()
	if err != nil {
		return false, fmt.Errorf("looking for the group's keys: %w", err)
	}
	return n > 0, nil
}
