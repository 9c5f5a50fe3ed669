package checkpointer

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/connect-kinesis/connect-kinesis/internal/consumer"
)

// provisionalField lists, in the group record, the shards whose
// checkpoint, close or lease a group record wrote that a re-seed then
// replaced, " a b ... " (reseed.lua): a holder of the kept record that
// presents such a shard's lease wins it back with its own position.
const provisionalField = "provisional"

// settledField lists, in the group record, the provisional shards whose
// position a holder of the kept record wrote back, " a b ... " (reseed.lua):
// a seed whose record lost writes no position there, and another record's
// lease of the shard is freed when it settles. A take that settles
// a provisional shard (acquire.lua) drops it here too.
const settledField = "settled"

// reopenedField lists, in the group record, the shards a re-seed won back
// from a newcomer's close, " a b ... ", until their reader closes them
// (reseed.lua, close.lua): a known close of theirs is not written back.
const reopenedField = "reopened"

// reopenedOf reads the reopened field's " a b ... " list as a set (nil
// when empty).
func reopenedOf(list string) map[string]bool {
	var out map[string]bool
	for _, id := range strings.Fields(list) {
		if out == nil {
			out = map[string]bool{}
		}
		out[id] = true
	}
	return out
}

// Reseed writes back what one instance knows into a store that forgot the
// group: the group record this store knows (of two records the one with the
// earlier start wins, so instances that disagree converge), checkpoints
// (only forwards; from a seed whose record lost, none into a shard the
// store does not know and only backwards into a provisional one, so that
// no later `latest` start passes a paused holder's position), the start
// override, closed shards and the instance's leases with their tokens,
// except those another instance holds with a newer token, those of shards
// closed or released under their token, and, from a seed whose record
// lost, those of shards the store does not know or knows only by a kept
// record's position; and the redelivery marks
// this store wrote (only forwards).
// The store then presents the record stored.
func (s *Store) Reseed(ctx context.Context, seed consumer.Seed) (consumer.Reseeded, error) {
	s.epochMu.Lock()
	epoch, start := s.epoch, s.groupStart
	// A close the caller learned from the store while it was provisional
	// (a newcomer's, or one made under a record that lost, from its own,
	// later `latest`) is no close of the kept record's holders: after the
	// store forgets again, the caller presents the kept record and its
	// close would land as theirs, over a reader that took the shard from
	// the kept record's earlier start, past records no one delivered. It
	// is not written back: while the store keeps it, it is there already,
	// and once the store forgot it, whoever takes the shard reads it from
	// that start and closes it at its end (a re-read, never a skip).
	seed.Closed = slices.DeleteFunc(slices.Clone(seed.Closed), func(id string) bool { return s.provClosed[id] })
	s.epochMu.Unlock()
	if epoch == "" {
		return consumer.Reseeded{}, errors.New("re-seeding the checkpoint store: no group record known yet (take a shard first)")
	}
	override := ""
	if seed.Override != nil {
		override = seed.Override.String()
	}
	created := ""
	if !seed.Created.IsZero() {
		created = strconv.FormatInt(seed.Created.UnixMilli(), 10)
	}
	args := []any{epoch, start.UnixMilli(), seed.Owner, s.periodMillis(), len(seed.Checkpoints), override, created}
	for _, shard := range slices.Sorted(maps.Keys(seed.Checkpoints)) {
		args = append(args, shard, seed.Checkpoints[shard].String())
	}
	args = append(args, len(seed.Closed))
	for _, shard := range seed.Closed {
		args = append(args, shard)
	}
	// The redelivery marks this store wrote or read at a take
	// (delivered.go): the seed of the consumer does not carry them, the
	// store remembers them.
	marks := s.marks.snapshot()
	args = append(args, len(marks))
	for _, shard := range slices.Sorted(maps.Keys(marks)) {
		args = append(args, shard, marks[shard].String())
	}
	for _, l := range seed.Leases {
		args = append(args, l.Shard, l.Token)
	}
	sent := time.Now()
	// What a re-seed writes back (the gate's closes above all) waits for
	// replicas as a commit or a close does: a failover right after it
	// would otherwise forget the group again. The script writes the
	// group record's re-seed time whenever it writes anything, so on Redis
	// 7.2 and later the WAIT has a write of its own connection to count; a
	// re-seed that writes nothing (a stale record, nothing to seed) has
	// nothing of its own to wait for.
	var res []any
	err := s.replicated(ctx, "re-seeding the checkpoint store", func(c redis.Scripter) error {
		var err error
		res, err = reseedScript.Run(ctx, c, []string{s.keys.Epoch, s.keys.Checkpoints, s.keys.Closed, s.keys.Leases, s.keys.Delivered, s.keys.Handoff}, args...).Slice()
		return err
	})
	if err != nil {
		return consumer.Reseeded{}, fmt.Errorf("re-seeding the checkpoint store: %w", err)
	}
	if len(res) < 6 || int(toInt(res[5])) > len(res)-6 {
		return consumer.Reseeded{}, fmt.Errorf("re-seeding the checkpoint store: unexpected script reply %v", res)
	}
	out := consumer.Reseeded{Epoch: toString(res[0]), GroupStart: time.UnixMilli(toInt(res[1])), FoundEpoch: toString(res[2])}
	out.RecordLost = out.Epoch != epoch
	s.epochMu.Lock()
	s.epoch, s.groupStart = out.Epoch, out.GroupStart
	s.epochMu.Unlock()
	exp, now, nLost := toInt(res[3]), toInt(res[4]), int(toInt(res[5]))
	// Lost leases were taken meanwhile; done ones (closed, or released
	// under their token) are neither renewed nor lost: their reader is
	// finishing anyway.
	skip := map[string]bool{}
	for i, v := range res[6:] {
		skip[toString(v)] = true
		if i < nLost {
			out.Lost = append(out.Lost, toString(v))
		}
	}
	for _, l := range seed.Leases {
		if skip[l.Shard] {
			continue
		}
		l.Owner = seed.Owner
		l.ExpiresAt = time.UnixMilli(exp)
		l.Deadline = sent.Add(time.Duration(exp-now) * time.Millisecond)
		out.Renewed = append(out.Renewed, l)
	}
	if err := s.renewedMarks(ctx, &out); err != nil {
		return consumer.Reseeded{}, err
	}
	return out, nil
}

// renewedMarks reads the redelivery marks of the shards a re-seed renewed
// into out.Delivered. A holder that won a shard back from a newcomer (a tie,
// or a provisional shard) reads on with the mark its own take read, below
// what the newcomer may have delivered since the store forgot: the store's
// mark, written forwards by both, tells it how far. Marks only move
// forwards, so reading them after the script misses nothing.
func (s *Store) renewedMarks(ctx context.Context, out *consumer.Reseeded) error {
	if len(out.Renewed) == 0 {
		return nil
	}
	shards := make([]string, len(out.Renewed))
	for i, l := range out.Renewed {
		shards[i] = l.Shard
	}
	vals, err := s.c.client.HMGet(ctx, s.keys.Delivered, shards...).Result()
	if err != nil {
		return fmt.Errorf("reading the redelivery marks of %d re-seeded shards: %w", len(shards), err)
	}
	for i, v := range vals {
		str, ok := v.(string)
		if !ok || str == "" {
			continue
		}
		p, err := consumer.ParsePosition(str)
		if err != nil {
			// An unreadable mark is reported at the shard's next take; here
			// it only cannot raise the reader's.
			continue
		}
		if out.Delivered == nil {
			out.Delivered = map[string]consumer.Position{}
		}
		out.Delivered[shards[i]] = p
		s.marks.raise(shards[i], p)
	}
	return nil
}
