package checkpointer

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"
	"time"

	"github.com/connect-kinesis/connect-kinesis/internal/consumer"
	"github.com/redis/go-redis/v9"
)

// startField is a field of the checkpoint hash that is not a shard: the start
// position an operator reset to. Kinesis shard ids never start with '_'.
const startField = "_start"

// shardStartPrefix begins a field "_start:<shardId>" of the checkpoint hash:
// where that one shard begins while it has no checkpoint, in the form of
// startField ("trim_horizon" or "at_timestamp=<RFC3339Nano>"). An import
// writes it for a shard the source had not started (a KCL lease at
// TRIM_HORIZON or AT_TIMESTAMP). It is its own field, not a value of the
// shard's field, so no reader takes it for a sequence number: a take reads
// it only when the shard has no checkpoint, and releases before it ignore
// it (they start such a shard at the group's start).
const shardStartPrefix = startField + ":"

// StartOverride reads the start position set by the last reset. ok is false
// when there is none: shards without a checkpoint then start at the input's
// configured start_position.
func (s *Store) StartOverride(ctx context.Context) (consumer.StartOverride, bool, error) {
	v, err := s.c.client.HGet(ctx, s.keys.Checkpoints, startField).Result()
	if errors.Is(err, redis.Nil) {
		return consumer.StartOverride{}, false, nil
	}
	if err != nil {
		return consumer.StartOverride{}, false, fmt.Errorf("reading start override: %w", err)
	}
	o, err := consumer.ParseStartOverride(v)
	if err != nil {
		return consumer.StartOverride{}, false, fmt.Errorf("reading start override: %w", err)
	}
	return o, true, nil
}

// ShardStarts reads the per-shard starts an import stored, by shard.
func (s *Store) ShardStarts(ctx context.Context) (map[string]consumer.StartOverride, error) {
	all, err := s.c.client.HGetAll(ctx, s.keys.Checkpoints).Result()
	if err != nil {
		return nil, fmt.Errorf("reading per-shard starts: %w", err)
	}
	out := map[string]consumer.StartOverride{}
	for field, v := range all {
		shard, ok := strings.CutPrefix(field, shardStartPrefix)
		if !ok {
			continue
		}
		o, err := consumer.ParseStartOverride(v)
		if err != nil {
			return nil, fmt.Errorf("reading the start of shard %s: %w", shard, err)
		}
		out[shard] = o
	}
	return out, nil
}

// ResetResult says what a reset or delete changed.
type ResetResult struct {
	// LiveLeases are the shards that had a live lease (refused unless
	// forced; with force their owners are fenced out).
	LiveLeases []string
	// LiveMembers are the running instances a delete was refused for.
	LiveMembers []string
	// Checkpoints and Closed are the state before the change.
	Checkpoints map[string]consumer.Position
	Closed      map[string]bool
	// Start is the start override stored (`latest` is stored as the
	// at_timestamp of the reset); nil when none.
	Start *consumer.StartOverride
}

// Reset replaces the group's position on the stream, atomically: every
// checkpoint and the closed set are deleted, hand-off requests dropped and
// every lease freed with its fencing token bumped (a reader still running
// is fenced out of its next commit or renewal). Then start, if given, is
// stored as the start override (shards without a checkpoint begin there),
// and exactly the given positions are written as checkpoints (SHARD_END ones
// also mark the shard closed), and starts as per-shard starts (where a shard
// without a checkpoint begins, ahead of the start override; trim_horizon or
// at_timestamp only); restoring an export may pass all. Refused with
// ErrLiveLeases while leases are live unless force.
func (s *Store) Reset(ctx context.Context, start *consumer.StartOverride, positions map[string]consumer.Position, starts map[string]consumer.StartOverride, force bool) (ResetResult, error) {
	marker := ""
	if start != nil {
		if start.Mode == consumer.StartLatest {
			// `latest` is stored as the time of the reset by the Redis
			// clock (less the skew margin), so every shard without a
			// checkpoint starts there, on every take by every instance.
			now, err := nowScript.Run(ctx, s.c.client, []string{s.keys.Checkpoints}).Int64()
			if err != nil {
				return ResetResult{}, fmt.Errorf("resetting checkpoints: reading the Redis clock: %w", err)
			}
			start = &consumer.StartOverride{Mode: consumer.StartAtTimestamp, Timestamp: time.UnixMilli(now).Add(-consumer.LatestSkewMargin)}
		}
		marker = start.String()
	}
	res, err := s.replace(ctx, "resetting checkpoints", marker, false, nil, positions, starts, force)
	res.Start = start
	return res, err
}

// ErrCheckpointsMoved: ReplaceCheckpoints found checkpoints other than the
// ones its caller expected (a reader committed since they were read), and
// changed nothing.
var ErrCheckpointsMoved = errors.New("checkpoints moved since they were read")

// ReplaceCheckpoints is what an import writes: like Reset, but the group's
// start override and the per-shard starts of shards given neither a
// position nor a start stay, and it writes only if the stored checkpoints
// are still expect (a reader of the group may commit between the caller's
// check of what moves back and the write, which would rewind that commit
// unseen): otherwise it changes nothing and returns ErrCheckpointsMoved.
func (s *Store) ReplaceCheckpoints(ctx context.Context, expect, positions map[string]consumer.Position, starts map[string]consumer.StartOverride, force bool) (ResetResult, error) {
	if expect == nil {
		expect = map[string]consumer.Position{}
	}
	return s.replace(ctx, "importing checkpoints", "", true, expect, positions, starts, force)
}

// replace runs resetScript (see there): keep keeps the starts not given,
// a non-nil expect is the checkpoints the write is judged on.
func (s *Store) replace(ctx context.Context, what, marker string, keep bool, expect, positions map[string]consumer.Position, starts map[string]consumer.StartOverride, force bool) (ResetResult, error) {
	args := []any{boolArg(force), marker, boolArg(keep)}
	if expect == nil {
		args = append(args, -1)
	} else {
		args = append(args, len(expect))
		for _, shard := range slices.Sorted(maps.Keys(expect)) {
			args = append(args, shard, expect[shard].String())
		}
	}
	for _, shard := range slices.Sorted(maps.Keys(positions)) {
		if shard == "" || strings.HasPrefix(shard, "_") {
			return ResetResult{}, fmt.Errorf("%s: %q is not a shard id", what, shard)
		}
		args = append(args, shard, positions[shard].String())
	}
	// The reset script writes each pair as a field of the checkpoint hash,
	// so per-shard starts ride along as "_start:<shard>" fields.
	for _, shard := range slices.Sorted(maps.Keys(starts)) {
		o := starts[shard]
		if shard == "" || strings.HasPrefix(shard, "_") {
			return ResetResult{}, fmt.Errorf("%s: %q is not a shard id", what, shard)
		}
		if o.Mode != consumer.StartTrimHorizon && o.Mode != consumer.StartAtTimestamp {
			return ResetResult{}, fmt.Errorf("%s: the start of shard %s must be %s or %s, not %q", what, shard, consumer.StartTrimHorizon, consumer.StartAtTimestamp, o.Mode)
		}
		args = append(args, shardStartPrefix+shard, o.String())
	}
	return s.runAdmin(ctx, what, resetScript,
		[]string{s.keys.Checkpoints, s.keys.Closed, s.keys.Leases, s.keys.Handoff}, args...)
}

// Delete removes every key of the group+stream: checkpoints, closed set,
// leases, members, hand-off requests and published progress. Refused with
// ErrLiveMembers while instances of the group heartbeat within the lease
// period, force or not: a running instance takes the deletion for a store
// that forgot the group and writes back what it knows, undoing it. Refused
// with ErrLiveLeases while leases are live unless force.
func (s *Store) Delete(ctx context.Context, force bool) (ResetResult, error) {
	return s.runAdmin(ctx, "deleting checkpoints", deleteScript,
		[]string{s.keys.Checkpoints, s.keys.Closed, s.keys.Leases, s.keys.Members, s.keys.Handoff, s.keys.Progress, s.keys.Epoch, s.keys.Delivered}, boolArg(force), s.periodMillis())
}

// runAdmin reads the state a reset or delete is about to change, then runs
// its script, which refuses ({0, liveShard...}) while leases are live unless
// forced, or changes the keys ({1, liveShard...}). A change is waited for
// as a commit is (replicated): a failover to a replica that missed it would
// bring back the old checkpoints and the readers' old tokens. A refusal
// writes nothing and is returned at once.
func (s *Store) runAdmin(ctx context.Context, what string, script *redis.Script, keys []string, args ...any) (ResetResult, error) {
	var res ResetResult
	var err error
	if res.Checkpoints, err = s.Checkpoints(ctx); err != nil {
		return res, err
	}
	if res.Closed, err = s.ClosedShards(ctx); err != nil {
		return res, err
	}
	err = s.replicated(ctx, what, func(c redis.Scripter) error {
		out, err := script.Run(ctx, c, keys, args...).Slice()
		if err != nil {
			return fmt.Errorf("%s: %w", what, err)
		}
		return s.adminOutcome(what, out, &res)
	})
	if err == nil {
		s.log.With("live_leases", len(res.LiveLeases)).Info(what + " done")
	}
	return res, err
}

func (s *Store) adminOutcome(what string, out []any, res *ResetResult) error {
	if len(out) < 1 {
		return fmt.Errorf("%s: unexpected script reply %v", what, out)
	}
	if toInt(out[0]) == 2 {
		return fmt.Errorf("%s: %w", what, ErrCheckpointsMoved)
	}
	if toInt(out[0]) == -1 {
		for _, v := range out[1:] {
			res.LiveMembers = append(res.LiveMembers, toString(v))
		}
		slices.Sort(res.LiveMembers)
		return fmt.Errorf("%s: instances %s of the group are running and would write back what they know at once (--force does not override this): stop them first, or wait one lease period after a crash: %w",
			what, strings.Join(res.LiveMembers, ", "), ErrLiveMembers)
	}
	for _, v := range out[1:] {
		res.LiveLeases = append(res.LiveLeases, toString(v))
	}
	slices.Sort(res.LiveLeases)
	if toInt(out[0]) != 1 {
		return fmt.Errorf("%s: shards %s have live leases (stop the pipelines first, or force): %w",
			what, strings.Join(res.LiveLeases, ", "), ErrLiveLeases)
	}
	return nil
}

func boolArg(b bool) string {
	if b {
		return "1"
	}
	return "0"
}

// AllHandoffRequests returns shard -> requester for every stored hand-off
// request, live or not, for inspection. Unlike HandoffRequests it prunes
// nothing.
func (s *Store) AllHandoffRequests(ctx context.Context) (map[string]string, error) {
	raw, err := s.c.client.HGetAll(ctx, s.keys.Handoff).Result()
	if err != nil {
		return nil, fmt.Errorf("reading hand-off requests: %w", err)
	}
	out := make(map[string]string, len(raw))
	for shard, v := range raw {
		// The stored value is "<requester>|<requested at, ms>".
		out[shard], _, _ = strings.Cut(v, "|")
	}
	return out, nil
}
