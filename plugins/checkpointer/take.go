package checkpointer

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/connect-kinesis/connect-kinesis/internal/consumer"
)

// Acquire takes a free or expired lease for owner, bumping its fencing
// token, and returns it with the shard's checkpoint, the start override,
// the shard's own start and the group's start, in one round trip. The
// store's first take joins the group, creating its record if there is
// none. A live lease gives ErrLeaseHeld, whoever holds it: one held under
// owner's own id is another process's under the same id (fencing holds per
// process, instance.go). A take whose checkpoint, start override or shard
// start cannot be read gives the lease back and logs an ERROR naming the
// field and its fix (giveBack).
func (s *Store) Acquire(ctx context.Context, shard, owner string) (consumer.Take, error) {
	t, err := s.AcquireMarked(ctx, shard, owner)
	t.Take.Delivered = t.Delivered
	return t.Take, err
}

// AcquireMany takes each shard as Acquire would, in one round trip of the
// acquire script (consumer.TakesBatcher).
func (s *Store) AcquireMany(ctx context.Context, shards []string, owner string) []consumer.TakeResult {
	marked := s.acquireMarked(ctx, shards, owner)
	out := make([]consumer.TakeResult, len(marked))
	for i, m := range marked {
		m.Take.Delivered = m.Delivered
		out[i] = consumer.TakeResult{Take: m.Take, Err: m.err}
	}
	return out
}

var _ consumer.TakesBatcher = (*Store)(nil)

// AcquireMarked is Acquire that also returns, from the same round trip, how
// far earlier owners may have delivered the shard (the redelivery mark,
// delivered.go).
func (s *Store) AcquireMarked(ctx context.Context, shard, owner string) (MarkedTake, error) {
	m := s.acquireMarked(ctx, []string{shard}, owner)[0]
	return m.MarkedTake, m.err
}

// markedResult is one shard's answer of acquireMarked.
type markedResult struct {
	MarkedTake
	err error
}

// acquireMarked takes shards in one call of the acquire script and reads
// each answer with its redelivery mark. A take that cannot be completed
// (a value nobody can read) gives its lease back; the others stand.
func (s *Store) acquireMarked(ctx context.Context, shards []string, owner string) []markedResult {
	out := make([]markedResult, len(shards))
	takes, delivered, err := s.acquire(ctx, shards, owner)
	for i := range shards {
		if err != nil {
			out[i].err = err
			continue
		}
		if takes[i].err != nil {
			out[i] = markedResult{MarkedTake: MarkedTake{Take: takes[i].Take}, err: takes[i].err}
			continue
		}
		out[i].MarkedTake, out[i].err = s.markTake(takes[i].Take, delivered[i])
	}
	return out
}

// markTake reads the redelivery mark of a take that just succeeded.
func (s *Store) markTake(t consumer.Take, delivered string) (MarkedTake, error) {
	shard := t.Shard
	m := MarkedTake{Take: t}
	if delivered != "" {
		var err error
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

// takeReply is one shard's answer of the acquire script.
type takeReply struct {
	consumer.Take
	err error
}

// acquireFields is the number of reply fields per shard of the acquire
// script, after its three of the call.
const acquireFields = 9

// acquire runs the acquire script over shards and returns each shard's
// take (or why not) and its redelivery mark as stored; err is the whole
// call's.
func (s *Store) acquire(ctx context.Context, shards []string, owner string) ([]takeReply, []string, error) {
	what := "acquiring lease for shard " + strings.Join(shards, ", ")
	if len(shards) > 1 {
		what = fmt.Sprintf("acquiring leases for %d shards", len(shards))
	}
	if len(shards) == 0 || owner == "" || slices.Contains(shards, "") {
		return nil, nil, fmt.Errorf("%s: shard and owner must be set", what)
	}
	args := make([]any, 0, 5+len(shards))
	args = append(args, owner, s.periodMillis(), s.knownEpoch(), newEpochID(), consumer.RestartWait(s.c.cfg.LeasePeriod).Milliseconds())
	for _, sh := range shards {
		args = append(args, sh)
	}
	sent := time.Now()
	res, err := acquireScript.Run(ctx, s.c.client, []string{s.keys.Leases, s.keys.Handoff, s.keys.Checkpoints, s.keys.Epoch, s.keys.Delivered}, args...).Slice()
	if err != nil {
		return nil, nil, storeErr(what, err)
	}
	if len(res) != 3+acquireFields*len(shards) {
		return nil, nil, fmt.Errorf("%s: unexpected script reply %v", what, res)
	}
	now := toInt(res[0])
	gstart := time.UnixMilli(toInt(res[2]))
	s.learnEpoch(toString(res[1]), gstart)
	takes := make([]takeReply, len(shards))
	delivered := make([]string, len(shards))
	for i, shard := range shards {
		r := res[3+acquireFields*i : 3+acquireFields*(i+1)]
		exp := toInt(r[2])
		t := consumer.Take{
			Lease:      consumer.Lease{Shard: shard, Owner: toString(r[1]), Token: toInt(r[3]), ExpiresAt: time.UnixMilli(exp)},
			GroupStart: gstart,
			Quiet:      time.Duration(toInt(r[6])) * time.Millisecond,
		}
		t.Deadline = sent.Add(time.Duration(exp-now) * time.Millisecond)
		what := "acquiring lease for shard " + shard
		switch {
		case toInt(r[0]) == 1:
			if err := s.readTake(&t, toString(r[4]), toString(r[5]), toString(r[8])); err != nil {
				s.giveBack(t.Lease, err)
				takes[i] = takeReply{err: fmt.Errorf("%s: %w", what, err)}
				continue
			}
			takes[i], delivered[i] = takeReply{Take: t}, toString(r[7])
		case t.Owner == "":
			takes[i] = takeReply{Take: t, err: fmt.Errorf("%s: the store was re-seeded; shards it does not know wait until %s for their holders to re-seed them: %w",
				what, t.ExpiresAt.UTC().Format(time.RFC3339Nano), consumer.ErrLeaseHeld)}
		default:
			takes[i] = takeReply{Take: t, err: fmt.Errorf("%s: held by %s until %s: %w", what, t.Owner, t.ExpiresAt.UTC().Format(time.RFC3339Nano), consumer.ErrLeaseHeld)}
		}
	}
	return takes, delivered, nil
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
// without a checkpoint, its own start (see shardStartPrefix), all read by
// the take's script.
func (s *Store) readTake(t *consumer.Take, ck, start, own string) error {
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
	if t.Checkpoint.IsZero() && own != "" {
		o, err := consumer.ParseStartOverride(own)
		if err != nil {
			return &badValue{key: s.keys.Checkpoints, field: shardStartPrefix + t.Shard, value: own, err: err}
		}
		t.ShardStart = &o
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

// newEpochID is a random id for a new group record.
func newEpochID() string {
	var b [8]byte
	_, _ = rand.Read(b[:])
	return hex.EncodeToString(b[:])
}
