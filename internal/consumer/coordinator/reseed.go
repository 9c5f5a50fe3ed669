package coordinator

import (
	"context"
	"errors"
	"maps"
	"slices"
	"time"

	"github.com/connect-kinesis/connect-kinesis/internal/consumer"
)

// A store that forgets (Redis restarted empty, flushed, or replaced) is
// told apart from a lost lease: the store answers ErrStoreForgot when the
// group record its caller knows is gone or replaced, or a lease the caller
// holds is unknown to it. Nobody took anything then, so the instance keeps
// reading what it holds and writes back what it knows: the group record
// (so `latest` keeps its start), the positions its readers reached, the
// closed shards and the start override it last saw, and its leases with
// their tokens.
//
// The positions are each shard's last *committed* one, kept per shard for
// as long as its reader here runs and no newer owner or operator's reset
// is known (known.go), and for the shards read here now the acked one: so
// a store that forgets during an outage of any length costs at most one
// commit period of reading plus what was in flight, and a reader that took
// a shard without a checkpoint counts as soon as it commits. The store
// hands no shard it does not know to anyone for a lease period after a
// re-seed, so every instance has time to re-seed its own shards before
// another could take them and start them over.
//
// A lease whose local deadline had passed when the store forgot is one
// this instance cannot know it still held: while it could not reach Redis
// (cut off, or paused) the lease may have lapsed there and another
// instance taken the shard under a newer token and read on. Re-seeded
// first, such a lease would be confirmed to its reader, which would read
// again from its own position what the newer owner had delivered, and
// without the mark the newer owner's writes carried (soak seed 3: a5 cut
// off for 1.9 leases, c3 took soak-a's shard 2, Redis came back empty
// while c3 was paused, a5 re-seeded first and delivered c3's records
// again unmarked). So it is re-seeded (the claim is kept, the token rule
// decides between the two) but confirmed to its reader only a lease
// period later, the time every live instance has to re-seed its own: a
// newer owner's re-seed wins the shard back meanwhile, and the renewal
// then finds it lost and stops the reader, which delivered nothing. If
// nobody claims it (Redis was down for everyone), the reader goes on from
// where it was after that lease period, with nothing read again.

// forgetWatch passes every call to the Store and tells the coordinator when
// one found that the store forgot the group.
type forgetWatch struct {
	consumer.Store
	forgot func()
}

func (w forgetWatch) saw(err error) error {
	if errors.Is(err, consumer.ErrStoreForgot) {
		w.forgot()
	}
	return err
}

func (w forgetWatch) Acquire(ctx context.Context, shard, owner string) (consumer.Take, error) {
	t, err := w.Store.Acquire(ctx, shard, owner)
	return t, w.saw(err)
}

// forgetWatchTakes is forgetWatch's batched take, for a store that has one.
type forgetWatchTakes struct {
	w  forgetWatch
	tb consumer.TakesBatcher
}

func (f forgetWatchTakes) AcquireMany(ctx context.Context, shards []string, owner string) []consumer.TakeResult {
	rs := f.tb.AcquireMany(ctx, shards, owner)
	for _, r := range rs {
		if errors.Is(r.Err, consumer.ErrStoreForgot) {
			f.w.forgot()
			break
		}
	}
	return rs
}

func (w forgetWatch) Release(ctx context.Context, l consumer.Lease) error {
	return w.saw(w.Store.Release(ctx, l))
}

func (w forgetWatch) Commit(ctx context.Context, l consumer.Lease, p consumer.Position) error {
	return w.saw(w.Store.Commit(ctx, l, p))
}

func (w forgetWatch) CloseShard(ctx context.Context, l consumer.Lease) error {
	return w.saw(w.Store.CloseShard(ctx, l))
}

func (w forgetWatch) Prune(ctx context.Context, shards []string) ([]string, error) {
	pruned, err := w.Store.Prune(ctx, shards)
	return pruned, w.saw(err)
}

func (w forgetWatch) ClosedShards(ctx context.Context) (map[string]bool, error) {
	m, err := w.Store.ClosedShards(ctx)
	return m, w.saw(err)
}

// storeForgot wakes the renew goroutine, which re-seeds the store.
func (co *coordinator) storeForgot() {
	select {
	case co.forgot <- struct{}{}:
	default:
	}
}

// reseed writes what this instance knows back into a store that forgot
// the group, and takes the leases it holds again. It runs on the renew
// goroutine, beside at most one periodic renewal still out (renewLoop): both
// present the same tokens, so whichever lands last confirms the same
// leases. Re-seeds run one at a time.
func (co *coordinator) reseed(ctx context.Context) {
	co.renewal.reseeding.Lock()
	defer co.renewal.reseeding.Unlock()
	attempt := time.Now()
	seed := consumer.Seed{Owner: co.c.owner, Checkpoints: map[string]consumer.Position{}}
	if ns := co.createdSeen.Load(); ns != 0 {
		// The stream the checkpoints below belong to: written back with
		// them, a stream deleted and created again later is told apart.
		seed.Created = time.Unix(0, ns)
	}
	co.known.mu.Lock()
	seed.Closed = slices.Sorted(maps.Keys(co.known.closedSet))
	seed.Override = co.known.override
	for id, e := range co.known.committed {
		seed.Checkpoints[id] = e.pos
	}
	co.known.mu.Unlock()
	byShard := map[string]shardReader{}
	lapsed := map[string]bool{}
	current := co.readersNow()
	for id, r := range current {
		if r.Lost() {
			// Its reader ends without closing the shard, so its position
			// is not this instance's to seed, as once the run loop forgot
			// it (known.gaveUp). A reader lost by its own fenced commit is
			// one no renewal told of a newer owner (newerOwner), and a
			// holder that won the shard back at a re-seed under the same
			// token is no newer one for a round (superseded).
			delete(seed.Checkpoints, id)
			continue
		}
		if r.Finished() {
			// Done but not yet forgotten by the run loop: its lease is
			// closed or handed back, and a closed shard is seeded closed.
			// A shard handed back is seeded with no position of this
			// instance's, as once the run loop forgot its reader
			// (known.gaveUp).
			if !r.Outcome().ClosedShard {
				delete(seed.Checkpoints, id)
				co.known.gaveUp(id)
			} else if !slices.Contains(seed.Closed, id) {
				seed.Closed = append(seed.Closed, id)
			}
			continue
		}
		if pos, ok := r.Checkpoint(); ok {
			seed.Checkpoints[id] = pos
		}
		seed.Leases = append(seed.Leases, r.Lease())
		byShard[id] = r
		lapsed[id] = !r.LeaseLive()
	}
	// A shard this instance still reads is not closed, whatever it learned:
	// a close it read from the store may be one a newcomer made from its
	// own `latest` on an emptied store, which this re-seed takes back
	// (its reader goes on from its own position and closes it itself).
	seed.Closed = slices.DeleteFunc(seed.Closed, func(id string) bool { _, reading := byShard[id]; return reading })
	for id, p := range seed.Checkpoints {
		if _, reading := byShard[id]; !reading && slices.Contains(seed.Closed, id) {
			delete(seed.Checkpoints, id)
		} else if p.IsZero() {
			delete(seed.Checkpoints, id)
		}
	}
	slices.Sort(seed.Closed)
	res, err := co.store.Reseed(ctx, seed)
	if err != nil {
		co.renewalFailed("Re-seeding the checkpoint store", byShard, err)
		return
	}
	co.renewal.succeeded(attempt)
	co.renewal.reseeded(attempt)
	if res.RecordLost {
		// This instance's group record lost to an older one: it was made on
		// an emptied store, and what this instance knows came from there.
		// The closes it knew are in the store now (this re-seed wrote those
		// that no holder of the kept record settled otherwise), so the
		// store's closed set is what counts from here: a close a holder of
		// the kept record took back is not written back over its reader.
		// Likewise a position of a shard this re-seed did not renew to
		// this instance was reached on the emptied store (from its later
		// `latest`): re-seeded after a later wipe, the store would keep it
		// as the later one over the kept record's holder and skip what
		// that holder had not read. Forgotten, it costs a re-read.
		renewed := map[string]bool{}
		for _, l := range res.Renewed {
			renewed[l.Shard] = true
		}
		co.known.mu.Lock()
		clear(co.known.closedSet)
		for id, e := range co.known.committed {
			if !renewed[id] {
				co.known.forgetLocked(id, e.token)
			}
		}
		// A reader of such a shard may still have a commit out, whose
		// reply must not bring the position back.
		for id, r := range current {
			if !renewed[id] {
				co.known.forgetLocked(id, r.Lease().Token)
			}
		}
		co.known.mu.Unlock()
		co.stopChildrenOfReopened(ctx, byShard)
	}
	found := "had no record of the group"
	if res.FoundEpoch == res.Epoch {
		found = "had lost this instance's leases; another instance had restored the group record"
	} else if res.FoundEpoch != "" {
		found = "held another group record (" + res.FoundEpoch + ")"
	}
	co.log.Errorf("The checkpoint store forgot this group's state (Redis restarted empty, flushed or replaced): it %s. "+
		"Re-seeded it with what this instance knows: group record %s (started %s), %d checkpoints, %d closed shards and %d leases; %d leases had been taken by another instance meanwhile",
		found, res.Epoch, res.GroupStart.UTC().Format(time.RFC3339), len(seed.Checkpoints), len(seed.Closed), len(res.Renewed), len(res.Lost))
	held := 0
	for _, l := range res.Renewed {
		r := byShard[l.Shard]
		if r == nil {
			continue
		}
		if m, ok := res.Delivered[l.Shard]; ok {
			// Won back from a newcomer (a tie, or a provisional shard), the
			// reader reads again what the newcomer may have delivered: the
			// store's mark, which the newcomer raised, marks it.
			r.RaiseDelivered(m)
		}
		if lapsed[l.Shard] {
			co.renewal.holdBack(l.Shard, time.Now().Add(co.c.cfg.LeasePeriod))
			held++
			continue
		}
		r.LeaseRenewed(l) // wakes its lanes waiting past the old deadline
	}
	if held > 0 {
		co.log.Warnf("%d re-seeded leases had passed their local deadline before the store forgot (this instance could not reach Redis, or was paused), so another instance may have taken them meanwhile: their readers wait a lease period (%v) for a newer owner to claim them back before reading on", held, co.c.cfg.LeasePeriod)
	}
	for _, id := range res.Lost {
		// Another instance holds the shard now (a newer token, or the
		// kept record's holder by the tie rule): its position is the
		// shard's, and this instance's must not be re-seeded after a
		// later wipe, where the store would keep it as the later one
		// and skip what the holder had not yet read. The reply of a
		// commit its reader made before does not put it back.
		r := byShard[id]
		if r == nil {
			co.known.newerOwner(id, 0)
			continue
		}
		co.known.newerOwner(id, r.Lease().Token)
		r.Log().Warn("Lease taken by another instance while the checkpoint store was re-seeded; stopping the shard reader")
		r.MarkLost()
	}
}

// stopChildrenOfReopened stops, with a final commit, the readers of
// shards one of whose parents a holder of the kept group record took back
// from a close this instance made on the emptied store: the holder reads
// the parent on from its own position, before the records this instance
// skipped from its `latest`. It runs at the re-seed that found this
// instance's record lost, before its readers hand anything more over:
// the next balancing round, which would stop them too (stopGatedReaders),
// comes only after more of the child was delivered ahead of the parent's
// records. The reopened list is read as a balancing round reads it (in
// one call from the Redis store); when that read fails, the next round
// stops the readers.
func (co *coordinator) stopChildrenOfReopened(ctx context.Context, readers map[string]shardReader) {
	rd, err := co.readRound(ctx)
	if err != nil {
		co.log.Warnf("Reading the shards a re-seed reopened failed; the readers of their children stop at the next balancing round: %v", err)
		return
	}
	reopened := rd.Reopened
	for _, id := range slices.Sorted(maps.Keys(readers)) {
		r := readers[id]
		for _, p := range r.Shard().Parents() {
			if reopened[p] {
				r.Log().Warnf("Stopping the shard's reader: its parent %s was taken back at a re-seed by an instance that read it before the store forgot the group, from a close this instance made since; the shard waits for the parent's records as every child does", p)
				r.Stop()
				break
			}
		}
	}
}
