package consumer

import (
	"context"
	"errors"
	"maps"
	"slices"
	"sync"
	"time"
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
// as long as no newer owner is known, and for the shards read here now the
// acked one: so a store that forgets during an outage of any length costs
// at most one commit period of reading plus what was in flight, and a
// reader that took a shard without a checkpoint counts as soon as it
// commits. The store hands no shard it does not know to anyone for a
// lease period after a re-seed, so every instance has time to re-seed its
// own shards before another could take them and start them over.

// known is what the coordinator knows of the group's state beyond its
// readers. The run goroutine writes it; the renew goroutine reads it.
type known struct {
	mu        sync.Mutex
	closedSet map[string]bool
	override  *StartOverride
	// committed is, per shard, the last checkpoint this instance took a
	// shard from or committed, until a newer owner is known.
	committed map[string]Position
}

// closed records a shard read to its end and closed by this instance.
func (k *known) closed(id string) {
	k.mu.Lock()
	defer k.mu.Unlock()
	if k.closedSet == nil {
		k.closedSet = map[string]bool{}
	}
	k.closedSet[id] = true
	delete(k.committed, id)
}

// take records where a taken shard starts and the override the store gave.
// The store's checkpoint replaces what was known, also when it is older or
// none: only an operator's reset moves a checkpoint back.
func (k *known) take(t Take) {
	k.mu.Lock()
	defer k.mu.Unlock()
	k.override = t.Override
	if t.Checkpoint.IsZero() {
		delete(k.committed, t.Shard)
		return
	}
	k.commit(t.Shard, t.Checkpoint)
}

// committedTo records a checkpoint a reader of this instance committed.
func (k *known) committedTo(id string, p Position) {
	k.mu.Lock()
	defer k.mu.Unlock()
	k.commit(id, p)
}

func (k *known) commit(id string, p Position) {
	if k.committed == nil {
		k.committed = map[string]Position{}
	}
	k.committed[id] = p
}

// newerOwner forgets a shard's position once another owner (or an
// operator's reset) is known to hold the shard: what it commits is newer.
func (k *known) newerOwner(id string) {
	k.mu.Lock()
	defer k.mu.Unlock()
	delete(k.committed, id)
}

// noteClosed replaces the known closed set with one read from the store.
// The read is checked against the group record, so a forgetting store's
// empty set never replaces what was known.
func (co *coordinator) noteClosed(closed map[string]bool) {
	co.known.mu.Lock()
	defer co.known.mu.Unlock()
	co.known.closedSet = maps.Clone(closed)
}

// forgetWatch passes every call to the Store and tells the coordinator when
// one found that the store forgot the group.
type forgetWatch struct {
	Store
	forgot func()
}

func (w forgetWatch) saw(err error) error {
	if errors.Is(err, ErrStoreForgot) {
		w.forgot()
	}
	return err
}

func (w forgetWatch) Acquire(ctx context.Context, shard, owner string) (Take, error) {
	t, err := w.Store.Acquire(ctx, shard, owner)
	return t, w.saw(err)
}

func (w forgetWatch) Release(ctx context.Context, l Lease) error {
	return w.saw(w.Store.Release(ctx, l))
}

func (w forgetWatch) Commit(ctx context.Context, l Lease, p Position) error {
	return w.saw(w.Store.Commit(ctx, l, p))
}

func (w forgetWatch) CloseShard(ctx context.Context, l Lease) error {
	return w.saw(w.Store.CloseShard(ctx, l))
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
// goroutine, so no renewal races with the leases it restores.
func (co *coordinator) reseed(ctx context.Context) {
	attempt := time.Now()
	seed := Seed{Owner: co.c.owner, Checkpoints: map[string]Position{}}
	co.known.mu.Lock()
	seed.Closed = slices.Sorted(maps.Keys(co.known.closedSet))
	seed.Override = co.known.override
	for id, p := range co.known.committed {
		seed.Checkpoints[id] = p
	}
	co.known.mu.Unlock()
	byShard := map[string]*shardReader{}
	current := co.readersNow()
	for id, r := range current {
		if r.lost.Load() {
			continue
		}
		if r.finished() {
			// Done but not yet forgotten by the run loop: its lease is
			// closed or handed back, and a closed shard is seeded closed.
			if r.closedShard && !slices.Contains(seed.Closed, id) {
				seed.Closed = append(seed.Closed, id)
			}
			continue
		}
		if pos, _, ok := r.tracker.checkpoint(); ok {
			seed.Checkpoints[id] = pos
		}
		seed.Leases = append(seed.Leases, *r.lease.Load())
		byShard[id] = r
	}
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
	co.lastRenewOK = attempt
	found := "had no record of the group"
	if res.FoundEpoch == res.Epoch {
		found = "had lost this instance's leases; another instance had restored the group record"
	} else if res.FoundEpoch != "" {
		found = "held another group record (" + res.FoundEpoch + ")"
	}
	co.log.Errorf("The checkpoint store forgot this group's state (Redis restarted empty, flushed or replaced): it %s. "+
		"Re-seeded it with what this instance knows: group record %s (started %s), %d checkpoints, %d closed shards and %d leases; %d leases had been taken by another instance meanwhile",
		found, res.Epoch, res.GroupStart.UTC().Format(time.RFC3339), len(seed.Checkpoints), len(seed.Closed), len(res.Renewed), len(res.Lost))
	for _, l := range res.Renewed {
		if r := byShard[l.Shard]; r != nil {
			r.lease.Store(&l)
		}
	}
	for _, id := range res.Lost {
		if r := byShard[id]; r != nil {
			r.log.Warn("Lease taken by another instance while the checkpoint store was re-seeded; stopping the shard reader")
			r.markLost()
		}
	}
}

// finished reports whether the reader has ended; closedShard is then
// final (it is written before done is closed).
func (r *shardReader) finished() bool {
	select {
	case <-r.done:
		return true
	default:
		return false
	}
}
