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
// group, creating its record if there is none. A live lease gives
// ErrLeaseHeld, whoever holds it: one held under owner's own id is another
// process's under the same id (fencing holds per process, instance.go). A
// take whose checkpoint, start override or shard start
// cannot be read gives the lease back and logs an ERROR naming the field
// and its fix (giveBack).
func (s *Store) Acquire(ctx context.Context, shard, owner string) (consumer.Take, error) {
	t, err := s.AcquireMarked(ctx, shard, owner)
	t.Take.Delivered = t.Delivered
	return t.Take, err
}

// AcquireMarked is Acquire that also returns, from the same round trip, how
// far earlier owners may have delivered the shard (the redelivery mark,
// delivered.go).
func (s *Store) AcquireMarked(ctx context.Context, shard, owner string) (MarkedTake, error) {
	t, delivered, err := s.acquire(ctx, shard, owner)
	if err != nil {
		return MarkedTake{Take: t}, err
	}
	m := MarkedTake{Take: t}
	if delivered != "" {
		if m.Delivered, err = consumer.ParsePosition(delivered); err != nil {
			bad := &badValue{key: s.keys.Delivered, field: shard, value: delivered, err: err,
				fix: fmt.Sprintf("write the highest sequence number any reader may have delivered from the shard there (`HSET %s %s <seq>`), or, if none is known, one at least as high as the shard's checkpoint", s.keys.Delivered, shard)}
			s.giveBack(t.Lease, bad)
			return MarkedTake{}, fmt.Errorf("acquiring lease for shard %s: %w", shard, bad)
		}
		// The holder now knows the mark as well as any store that wrote
		// it: a store that forgot before this holder's first write gets it
		// back from this holder's re-seed (reseed.go), else the owner after
		// it would deliver the earlier owner's records unmarked.
		s.marks.raise(shard, m.Delivered)
	}
	// A mark this store remembers (it wrote it, or read it at an earlier
	// take of the shard) counts too: a store that forgot, re-seeded by
	// another instance first, has none, and a shard this instance handed
	// on and takes back would otherwise deliver the records of the owner
	// before it unmarked (seed 4, 1 h: kpl-k0/1298 and on, 142 records of
	// one key). A mark too high only marks a record never delivered.
	if known, ok := s.marks.get(shard); ok && (m.Delivered.IsZero() || known.Compare(m.Delivered) > 0) {
		m.Delivered = known
	}
	return m, nil
}

func (s *Store) acquire(ctx context.Context, shard, owner string) (consumer.Take, string, error) {
	if shard == "" || owner == "" {
		return consumer.Take{}, "", fmt.Errorf("acquiring lease: shard and owner must be set")
	}
	what := "acquiring lease for shard " + shard
	sent := time.Now()
	res, err := acquireScript.Run(ctx, s.c.client, []string{s.keys.Leases, s.keys.Handoff, s.keys.Checkpoints, s.keys.Epoch, s.keys.Delivered},
		shard, owner, s.periodMillis(), s.knownEpoch(), newEpochID(), consumer.RestartWait(s.c.cfg.LeasePeriod).Milliseconds()).Slice()
	if err != nil {
		return consumer.Take{}, "", storeErr(what, err)
	}
	if len(res) != 11 {
		return consumer.Take{}, "", fmt.Errorf("%s: unexpected script reply %v", what, res)
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
			return t, "", fmt.Errorf("%s: the store was re-seeded; shards it does not know wait until %s for their holders to re-seed them: %w",
				what, t.ExpiresAt.UTC().Format(time.RFC3339Nano), consumer.ErrLeaseHeld)
		}
		return t, "", fmt.Errorf("%s: held by %s until %s: %w", what, t.Owner, t.ExpiresAt.UTC().Format(time.RFC3339Nano), consumer.ErrLeaseHeld)
	}
	if err := s.readTake(ctx, &t, toString(res[7]), toString(res[8])); err != nil {
		s.giveBack(t.Lease, err)
		return consumer.Take{}, "", fmt.Errorf("%s: %w", what, err)
	}
	return t, toString(res[10]), nil
}

// badValue is a value of the checkpoint hash a take cannot read.
type badValue struct {
	key, field, value string
	err               error
	// fix replaces the usual fix (export, correct, reset) when set.
	fix string
}

func (e *badValue) Error() string {
	if e.fix != "" {
		return fmt.Sprintf("the value %q of field %q of %s cannot be read (%v); fix it: %s", e.value, e.field, e.key, e.err, e.fix)
	}
	return fmt.Sprintf("the value %q of field %q of %s cannot be read (%v); fix it: write the group's state out with `connect-kinesis checkpoints export ...`, correct that field in the file and write it back with `connect-kinesis checkpoints reset ... --to sequences=<file>`, or start the group over with `connect-kinesis checkpoints reset ... --to trim_horizon` (or latest, at_timestamp=<RFC3339>)",
		e.value, e.field, e.key, e.err)
}

func (e *badValue) Unwrap() error { return e.err }

// readTake fills in the checkpoint, the start override and, for a shard
// without a checkpoint, its own start.
func (s *Store) readTake(ctx context.Context, t *consumer.Take, ck, start string) error {
	var err error
	if ck != "" {
		if t.Checkpoint, err = consumer.ParsePosition(ck); err != nil {
			return &badValue{key: s.keys.Checkpoints, field: t.Shard, value: ck, err: err}
		}
	}
	if start != "" {
		o, err := consumer.ParseStartOverride(start)
		if err != nil {
			return &badValue{key: s.keys.Checkpoints, field: startField, value: start, err: err}
		}
		t.Override = &o
	}
	if t.Checkpoint.IsZero() {
		if t.ShardStart, err = s.shardStart(ctx, t.Shard); err != nil {
			return err
		}
	}
	return nil
}

// giveBack releases a lease just taken whose take could not be completed:
// held, it would keep the shard from every reader until it expired, and
// this instance would renew it on its next take. A value nobody can read
// is an operator's to fix, so it is logged as an ERROR; the release is
// bounded by its own timeout, as the take's ctx may be what ended.
func (s *Store) giveBack(l consumer.Lease, cause error) {
	var bad *badValue
	log := s.log.With("shard", l.Shard)
	if errors.As(cause, &bad) {
		log.Errorf("Gave the lease back: %v", cause)
	}
	ctx, cancel := context.WithTimeout(context.Background(), s.c.cfg.LeasePeriod)
	defer cancel()
	if err := s.Release(ctx, l); err != nil {
		log.Warnf("Giving back the lease of a take that could not be completed failed; it frees itself after lease.period: %v", err)
	}
}

// shardStart reads the shard's own start (see shardStartPrefix); nil when
// it has none, a *badValue when it cannot be read. It is read apart from the take, and only for a shard without
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
		return nil, &badValue{key: s.keys.Checkpoints, field: shardStartPrefix + shard, value: v, err: err}
	}
	return &o, nil
}

// newEpochID is a random id for a new group record.
func newEpochID() string {
	var b [8]byte
	_, _ = rand.Read(b[:])
	return hex.EncodeToString(b[:])
}
