package checkpointer

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"strings"
	"sync"

	"github.com/redis/go-redis/v9"

	"github.com/connect-kinesis/connect-kinesis/internal/consumer"
)

// The redelivery mark's store. An owner stores how far it may deliver each
// shard before it hands those records to the pipeline, in one script call
// for all of its shards of the stream (WriteDelivered), fenced by each
// lease's token like a commit. A take reads the shard's value in the same
// round trip as its lease (AcquireMarked); its reader marks every record at
// or below it as possibly delivered before. Since the take replaces the
// token every earlier write was fenced by, no earlier owner can deliver
// past what the take read. A store that forgot gets the values back from
// each instance's re-seed (Reseed writes what this store wrote, and what
// its takes read).

// deliveredScript: KEYS lease, delivered, epoch; ARGV owner, epoch, then
// shard, token, position triples. Writes each position only forwards and
// only while the lease names owner under that token. Returns the shards
// fenced and, as shard, mark pairs, the mark each written shard held
// before the write; FORGOT when the caller's group record is gone or
// replaced.
var deliveredScript = newScript("delivered")

// restoreDeliveredScript: KEYS delivered; ARGV shard, position pairs, each
// written only forwards. For `reset --to sequences=<export>`.
var restoreDeliveredScript = newScript("restore_delivered")

// MarkedTake is a take with the shard's redelivery mark.
type MarkedTake struct {
	consumer.Take
	// Delivered is the highest position an earlier owner may have handed
	// to a pipeline; zero when none is stored. A record at or below it
	// may have been delivered before.
	Delivered consumer.Position
}

// DeliveredMark asks to store that the reader of Shard, holding its lease
// under Token, may deliver up to Position.
type DeliveredMark struct {
	Shard    string
	Token    int64
	Position consumer.Position
}

// deliveredMarks remembers, per shard, the highest position this store
// wrote or read at a take, so a re-seed can write them back into a store
// that forgot.
type deliveredMarks struct {
	mu sync.Mutex
	m  map[string]consumer.Position
}

func (d *deliveredMarks) raise(shard string, p consumer.Position) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.m == nil {
		d.m = map[string]consumer.Position{}
	}
	if cur, ok := d.m[shard]; !ok || cur.Compare(p) < 0 {
		d.m[shard] = p
	}
}

// get returns the mark remembered for shard, ok false when none is.
func (d *deliveredMarks) get(shard string) (consumer.Position, bool) {
	d.mu.Lock()
	defer d.mu.Unlock()
	p, ok := d.m[shard]
	return p, ok
}

func (d *deliveredMarks) snapshot() map[string]consumer.Position {
	d.mu.Lock()
	defer d.mu.Unlock()
	return maps.Clone(d.m)
}

func (d *deliveredMarks) forget(shards ...string) {
	d.mu.Lock()
	defer d.mu.Unlock()
	for _, s := range shards {
		delete(d.m, s)
	}
}

// maxMarksPerCall bounds the shards of one delivered-position write: the
// script passes them to HMGET and HSET with Lua's unpack, which Redis' Lua
// limits to about 8,000 values (two per shard for the HSET).
const maxMarksPerCall = 2000

// WriteDelivered stores how far each of owner's shards of the stream may be
// delivered, in one script call (one per 2,000 shards). A shard whose lease
// no longer names owner under the mark's token is not written and is
// returned in fenced: its reader must not deliver past what an earlier
// write stored. A position not after the stored one changes nothing, so the
// mark never moves back. consumer.ErrStoreForgot when the group record is
// gone or replaced (re-seed, then write again). With replicas to wait for,
// the write is done only once they acknowledged it, as a commit is.
func (s *Store) WriteDelivered(ctx context.Context, owner string, marks []DeliveredMark) (fenced []string, err error) {
	w, err := s.WriteDeliveredFound(ctx, owner, marks)
	return w.Fenced, err
}

// MarksWritten is what a write of redelivery marks found.
type MarksWritten struct {
	// Fenced are the shards not written: their lease no longer names the
	// owner under the mark's token.
	Fenced []string
	// Found is, per shard written, the mark the store held before the
	// write, when it held one. Above what the shard's reader marks against,
	// it is how far another owner may have delivered the shard under this
	// very lease's token: a re-seed won the shard back from a newcomer and
	// its reply was lost, so the reader never learned the newcomer's mark.
	Found map[string]consumer.Position
}

// WriteDeliveredFound is WriteDelivered that also returns the marks the
// store held before the write (MarksWritten.Found): a reader raises its own
// to them before it hands over the records the write covers.
func (s *Store) WriteDeliveredFound(ctx context.Context, owner string, marks []DeliveredMark) (MarksWritten, error) {
	var out MarksWritten
	for len(marks) > 0 {
		n := min(len(marks), maxMarksPerCall)
		err := s.writeDelivered(ctx, owner, marks[:n], &out)
		if err != nil {
			return out, err
		}
		marks = marks[n:]
	}
	return out, nil
}

func (s *Store) writeDelivered(ctx context.Context, owner string, marks []DeliveredMark, out *MarksWritten) error {
	epoch := s.knownEpoch()
	if epoch == "" {
		return fmt.Errorf("storing delivered positions: no group record known yet (take a shard first)")
	}
	args := make([]any, 0, 2+3*len(marks))
	args = append(args, owner, epoch)
	for _, m := range marks {
		if m.Position.IsZero() {
			return fmt.Errorf("storing delivered positions: empty position for shard %s", m.Shard)
		}
		args = append(args, m.Shard, m.Token, m.Position.String())
	}
	what := fmt.Sprintf("storing delivered positions of %d shards", len(marks))
	var fenced, found []string
	err := s.replicated(ctx, what, func(c redis.Scripter) error {
		res, err := deliveredScript.Run(ctx, c, []string{s.keys.Leases, s.keys.Delivered, s.keys.Epoch}, args...).Slice()
		if err != nil {
			return storeErr(what, err)
		}
		if fenced, found, err = parseDeliveredReply(res); err != nil {
			return fmt.Errorf("%s: %w", what, err)
		}
		return nil
	})
	if err != nil {
		return err
	}
	out.Fenced = append(out.Fenced, fenced...)
	lost := make(map[string]bool, len(fenced))
	for _, f := range fenced {
		lost[f] = true
	}
	for _, m := range marks {
		if !lost[m.Shard] {
			s.marks.raise(m.Shard, m.Position)
		}
	}
	for i := 0; i+1 < len(found); i += 2 {
		p, err := consumer.ParsePosition(found[i+1])
		if err != nil || p.IsZero() {
			// An unreadable mark is reported at the shard's next take;
			// here it only cannot raise the reader's.
			continue
		}
		if out.Found == nil {
			out.Found = map[string]consumer.Position{}
		}
		out.Found[found[i]] = p
		s.marks.raise(found[i], p)
	}
	return nil
}

// parseDeliveredReply splits delivered.lua's reply: the shards fenced, and
// the shard, mark pairs found.
func parseDeliveredReply(res []any) (fenced, found []string, err error) {
	if len(res) != 2 {
		return nil, nil, fmt.Errorf("unexpected script reply %v", res)
	}
	for i, part := range []*[]string{&fenced, &found} {
		vals, ok := res[i].([]any)
		if !ok {
			return nil, nil, fmt.Errorf("unexpected script reply %v", res)
		}
		for _, v := range vals {
			str, ok := v.(string)
			if !ok {
				return nil, nil, fmt.Errorf("unexpected script reply %v", res)
			}
			*part = append(*part, str)
		}
	}
	if len(found)%2 != 0 {
		return nil, nil, fmt.Errorf("unexpected script reply %v", res)
	}
	return fenced, found, nil
}

// Delivered reads every shard's redelivery mark, for operators.
func (s *Store) Delivered(ctx context.Context) (map[string]consumer.Position, error) {
	raw, err := s.c.client.HGetAll(ctx, s.keys.Delivered).Result()
	if err != nil {
		return nil, fmt.Errorf("reading delivered positions: %w", err)
	}
	out := make(map[string]consumer.Position, len(raw))
	for shard, v := range raw {
		p, err := consumer.ParsePosition(v)
		if err != nil {
			return nil, fmt.Errorf("reading the delivered position of shard %s: %w", shard, err)
		}
		out[shard] = p
	}
	return out, nil
}

// RestoreDelivered writes marks back (from an export), each only forwards,
// and returns how many it moved. With replicas to wait for, it is done only
// once they acknowledged it, as a commit is.
func (s *Store) RestoreDelivered(ctx context.Context, marks map[string]consumer.Position) (int, error) {
	if len(marks) == 0 {
		return 0, nil
	}
	args := make([]any, 0, 2*len(marks))
	for _, shard := range slices.Sorted(maps.Keys(marks)) {
		if strings.HasPrefix(shard, "_") || marks[shard].IsZero() {
			return 0, fmt.Errorf("restoring delivered positions: %q is not a shard with a position", shard)
		}
		args = append(args, shard, marks[shard].String())
	}
	what := fmt.Sprintf("restoring delivered positions of %d shards", len(marks))
	var n int
	err := s.replicated(ctx, what, func(c redis.Scripter) error {
		var err error
		if n, err = restoreDeliveredScript.Run(ctx, c, []string{s.keys.Delivered}, args...).Int(); err != nil {
			return fmt.Errorf("%s: %w", what, err)
		}
		return nil
	})
	return n, err
}

// noteReseeded writes this store's remembered marks back (only forwards)
// when a balancing round finds the store re-seeded since the last one it
// saw (the group record's re-seed time, reseeded). The re-seed of another
// instance restores its own knowledge only, and this instance re-seeds
// only when its own check finds the record gone, which a member holding
// no shard of the stream never runs: the marks it read at takes and wrote
// for shards it has since handed on were lost with the wipe, and the next
// owner delivered the records they cover unmarked (seed 4, 1 h: 251
// records of soak-dyn-1#5's shard 1 first delivered by b19, which held no
// shard of the stream at the third wipe in 20 s). A failed write is tried
// again at the next round.
func (s *Store) noteReseeded(ctx context.Context, reseeded int64) {
	if reseeded == 0 || s.seenReseed.Swap(reseeded) == reseeded {
		return
	}
	n, tried, err := s.writeBackMarks(ctx)
	if err != nil {
		s.seenReseed.Store(0)
		if s.log != nil {
			s.log.Warnf("Writing back how far %d shards were delivered after the store was re-seeded failed; trying again at the next balancing round: %v", tried, err)
		}
		return
	}
	if n > 0 && s.log != nil {
		s.log.Infof("The checkpoint store was re-seeded by another instance; wrote back how far %d shards this instance read or took were delivered, so their next owners mark those records as redelivered", n)
	}
}

// writeBackMarks writes every mark this store wrote or read at a take back,
// each only forwards: n were ahead of what the store held, of tried.
func (s *Store) writeBackMarks(ctx context.Context) (n, tried int, err error) {
	marks := s.marks.snapshot()
	for shard, p := range marks {
		if p.IsZero() || strings.HasPrefix(shard, "_") {
			delete(marks, shard)
		}
	}
	n, err = s.RestoreDelivered(ctx, marks)
	return n, len(marks), err
}
