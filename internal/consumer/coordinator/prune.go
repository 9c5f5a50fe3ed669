package coordinator

import (
	"context"
	"errors"
	"maps"
	"slices"
	"time"

	"github.com/connect-kinesis/connect-kinesis/internal/consumer"
)

// Pruning the shards a stream no longer lists.
//
// A shard trimmed past the retention period leaves ListShards, but its
// checkpoint, closed mark, lease, published progress and this process's
// memory of it (lastRead, lastOwner, known) would stay for ever: on a
// stream that reshards on its own, every balancing round would read
// thousands of dead entries. As KCL's lease clean-up does, they are
// removed once nothing can need them:
//   - the shard is absent from complete listings for at least pruneGrace
//     (one odd answer never prunes anything);
//   - the gate counts a parent that is not listed as closed, so its closed
//     mark is no longer needed by its children; still, a shard is kept
//     while a listed child of it was never taken (no lease entry yet);
//   - its lease is not live (the store checks that in the same script) and
//     no reader of this instance holds it: a reader may still drain it.
// The per-shard kinesis_input_millis_behind_latest series cannot be
// removed (Benthos gauges have no delete); a reader sets its shard's to 0
// when it ends, so a dead shard's series stays at 0.

// maxPrunePerRound bounds one prune call, so that a backlog (the first
// start of a release that prunes, on a stream resharded for months) is
// cleared over a few discoveries without a long-running script.
const maxPrunePerRound = 256

// pruneGrace is how long a shard must have been absent from complete
// listings before it is pruned.
func (co *coordinator) pruneGrace() time.Duration {
	return max(2*co.c.cfg.DiscoveryInterval, 2*co.c.cfg.LeasePeriod)
}

// pruneUnlisted runs in a balancing round right after a complete listing,
// with the store's closed set (merged with what this instance knows) and
// leases read in that round.
func (co *coordinator) pruneUnlisted(ctx context.Context, closed map[string]bool, leases map[string]consumer.LeaseState) {
	if !co.listingFresh || len(co.listed) == 0 {
		return
	}
	co.listingFresh = false
	now := time.Now()
	inStore := map[string]bool{}
	for id := range leases {
		inStore[id] = true
	}
	for id := range closed {
		inStore[id] = true
	}
	// A reset or an import writes checkpoints (and shard starts) for
	// shards nobody may ever lease: they are the store's entries too.
	if cl, ok := co.checkpointLister(); ok {
		ids, err := cl.CheckpointedShards(ctx)
		if err != nil {
			co.log.Debugf("Listing the shards with a checkpoint failed; pruning only those with a lease or a close this time: %v", err)
		}
		for _, id := range ids {
			inStore[id] = true
		}
	}
	// Shards read by a listed child that was never taken stay.
	needed := map[string]bool{}
	for _, s := range co.listed {
		if _, taken := leases[s.ID]; taken || closed[s.ID] {
			continue
		}
		needed[s.Parent], needed[s.Adjacent] = true, true
	}
	var due []string
	for id := range co.unlistedShards(inStore) {
		if _, seen := co.unlistedSince[id]; !seen {
			co.unlistedSince[id] = now
		}
		if now.Sub(co.unlistedSince[id]) < co.pruneGrace() || needed[id] || co.readers[id] != nil {
			continue
		}
		if ls, ok := leases[id]; ok && !ls.Expired && ls.Owner != "" {
			continue
		}
		due = append(due, id)
	}
	// A shard listed again (a listing that had hidden it) starts over.
	maps.DeleteFunc(co.unlistedSince, func(id string, _ time.Time) bool {
		_, listed := co.listed[id]
		return listed
	})
	slices.Sort(due)
	due = due[:min(len(due), maxPrunePerRound)]
	var pruned []string
	if stored := slices.DeleteFunc(slices.Clone(due), func(id string) bool { return !inStore[id] }); len(stored) > 0 {
		var err error
		pruned, err = co.store.Prune(ctx, stored)
		if err != nil {
			if !errors.Is(err, consumer.ErrStoreForgot) {
				co.log.Warnf("Pruning %d shards the stream no longer lists failed; retrying after the next listing: %v", len(stored), err)
			}
			return
		}
		if len(pruned) > 0 {
			co.log.Debugf("Pruned the checkpoints, leases and closed marks of %d shards the stream no longer lists (trimmed): %v", len(pruned), pruned)
		}
	}
	done := map[string]bool{}
	for _, id := range pruned {
		done[id] = true
	}
	for _, id := range due {
		if !inStore[id] || done[id] {
			co.forgetShard(id)
		}
	}
}

// unlistedShards are the shards the store or this process has entries of
// that the listing lacks.
func (co *coordinator) unlistedShards(inStore map[string]bool) map[string]bool {
	out := map[string]bool{}
	add := func(id string) {
		if _, listed := co.listed[id]; !listed && id != "" {
			out[id] = true
		}
	}
	for id := range inStore {
		add(id)
	}
	for id := range co.unlistedSince {
		add(id)
	}
	for id := range co.lastOwner {
		add(id)
	}
	co.lastRead.Range(func(k, _ any) bool {
		add(k.(string))
		return true
	})
	co.known.mu.Lock()
	for id := range co.known.closedSet {
		add(id)
	}
	for id := range co.known.committed {
		add(id)
	}
	co.known.mu.Unlock()
	return out
}

// forgetShard drops what this process remembers of a pruned shard.
func (co *coordinator) forgetShard(id string) {
	delete(co.unlistedSince, id)
	delete(co.lastOwner, id)
	delete(co.moved, id)
	delete(co.asked, id)
	delete(co.handedOff, id)
	co.lastRead.Delete(id)
	co.known.mu.Lock()
	delete(co.known.closedSet, id)
	delete(co.known.committed, id)
	delete(co.known.forgotten, id)
	co.known.mu.Unlock()
}

func (co *coordinator) checkpointLister() (consumer.CheckpointLister, bool) {
	var s consumer.Store = co.store
	if w, ok := s.(forgetWatch); ok {
		s = w.Store
	}
	cl, ok := s.(consumer.CheckpointLister)
	return cl, ok
}
