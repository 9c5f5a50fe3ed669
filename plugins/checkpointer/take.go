package checkpointer

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/connect-kinesis/connect-kinesis/internal/consumer"
)

// Acquire takes a free or expired lease for owner, bumping its fencing
// token, and returns it with the shard's checkpoint, the start override and
// the group's start, in one round trip (and a second, only for a shard
// without a checkpoint, for its own start). The store's first take joins the
// group, creating its record if there is none. A live lease of another
// owner gives ErrLeaseHeld; one the owner already holds is renewed with its
// token unchanged.
func (s *Store) Acquire(ctx context.Context, shard, owner string) (consumer.Take, error) {
	if shard == "" || owner == "" {
		return consumer.Take{}, fmt.Errorf("acquiring lease: shard and owner must be set")
	}
	what := "acquiring lease for shard " + shard
	sent := time.Now()
	res, err := acquireScript.Run(ctx, s.c.client, []string{s.keys.Leases, s.keys.Handoff, s.keys.Checkpoints, s.keys.Epoch},
		shard, owner, s.periodMillis(), s.knownEpoch(), newEpochID()).Slice()
	if err != nil {
		return consumer.Take{}, storeErr(what, err)
	}
	if len(res) != 10 {
		return consumer.Take{}, fmt.Errorf("%s: unexpected script reply %v", what, res)
	}
	s.learnEpoch(toString(res[5]), time.UnixMilli(toInt(res[6])))
	t := consumer.Take{
		Lease:      consumer.Lease{Shard: shard, Owner: toString(res[1]), Token: toInt(res[3]), ExpiresAt: time.UnixMilli(toInt(res[2]))},
		GroupStart: time.UnixMilli(toInt(res[6])),
		Quiet:      time.Duration(toInt(res[9])) * time.Millisecond,
	}
	t.Deadline = sent.Add(time.Duration(toInt(res[2])-toInt(res[4])) * time.Millisecond)
	if toInt(res[0]) != 1 {
		if t.Owner == "" {
			return t, fmt.Errorf("%s: the store was re-seeded; shards it does not know wait until %s for their holders to re-seed them: %w",
				what, t.ExpiresAt.UTC().Format(time.RFC3339Nano), consumer.ErrLeaseHeld)
		}
		return t, fmt.Errorf("%s: held by %s until %s: %w", what, t.Owner, t.ExpiresAt.UTC().Format(time.RFC3339Nano), consumer.ErrLeaseHeld)
	}
	if v := toString(res[7]); v != "" {
		if t.Checkpoint, err = consumer.ParsePosition(v); err != nil {
			return t, fmt.Errorf("%s: reading its checkpoint: %w", what, err)
		}
	}
	if v := toString(res[8]); v != "" {
		o, err := consumer.ParseStartOverride(v)
		if err != nil {
			return t, fmt.Errorf("%s: reading the start override: %w", what, err)
		}
		t.Override = &o
	}
	if t.Checkpoint.IsZero() {
		if t.ShardStart, err = s.shardStart(ctx, shard); err != nil {
			return t, fmt.Errorf("%s: %w", what, err)
		}
	}
	return t, nil
}

// shardStart reads the shard's own start (see shardStartPrefix); nil when
// it has none. It is read apart from the take, and only for a shard without
// a checkpoint, which leaves the acquire script and its reply as they were:
// only an import or reset writes the field, and either fences the lease just
// taken, so a reader that saw a newer value commits nothing from it.
func (s *Store) shardStart(ctx context.Context, shard string) (*consumer.StartOverride, error) {
	v, err := s.c.client.HGet(ctx, s.keys.Checkpoints, shardStartPrefix+shard).Result()
	if errors.Is(err, redis.Nil) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("reading the shard's own start: %w", err)
	}
	o, err := consumer.ParseStartOverride(v)
	if err != nil {
		return nil, fmt.Errorf("reading the shard's own start: %w", err)
	}
	return &o, nil
}

// newEpochID is a random id for a new group record.
func newEpochID() string {
	var b [8]byte
	_, _ = rand.Read(b[:])
	return hex.EncodeToString(b[:])
}
