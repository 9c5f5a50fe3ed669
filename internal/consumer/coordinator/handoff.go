package coordinator

import (
	"context"
	"maps"
	"math/rand/v2"
	"slices"
	"time"

	"github.com/connect-kinesis/connect-kinesis/internal/consumer"
)

// handOverRequested stops the readers of shards that other members asked
// for, at most spare of them, so this instance keeps at least its floor
// share, and only those allow lets go (nil: all). A stopped reader commits
// and releases; the requester then takes the shard. It returns how many it
// handed over.
func (co *coordinator) handOverRequested(ctx context.Context, spare int, allow func(shard, requester string) bool) int {
	reqs, err := co.store.HandoffRequests(ctx, co.c.owner)
	if err != nil {
		co.log.Warnf("Reading hand-off requests failed: %v", err)
		return 0
	}
	n := 0
	for _, id := range slices.Sorted(maps.Keys(reqs)) {
		r := co.readers[id]
		if r == nil || r.Stopping() || n >= spare || (allow != nil && !allow(id, reqs[id])) {
			continue
		}
		co.log.With("shard", id).Debugf("Handing the shard over to %s", reqs[id])
		r.Stop()
		co.handedOff[id] = time.Now()
		n++
	}
	return n
}

// forgetOldHandOffs lets this instance take again, after two balancing
// rounds, a shard it handed over.
func (co *coordinator) forgetOldHandOffs() {
	maps.DeleteFunc(co.handedOff, func(_ string, at time.Time) bool {
		return time.Since(at) > 2*co.c.cfg.RebalancePeriod
	})
}

// askForHandOff asks the members holding more ready shards than their
// share for some of them, want in all (this instance's shortfall). Each
// member is asked for what it holds above share, at least one, and only
// while it holds at least two more than this instance, so two members one
// shard apart never trade a shard back and forth. Asking for the whole
// shortfall at once lets an instance that joined late (or started a moment
// after the others and found every shard taken) reach its share in a few
// balancing rounds rather than one shard per round: with thousands of
// shards that is minutes instead of hours. The shards are picked at random
// among a member's, so that several instances asking at once mostly ask
// for different ones.
func (co *coordinator) askForHandOff(ctx context.Context, ready []string, leases map[string]consumer.LeaseState, mine, share int) {
	held := map[string][]string{}
	for id, ls := range leases {
		// ready is sorted (readyShards).
		if _, isReady := slices.BinarySearch(ready, id); isReady && !ls.Expired && ls.Owner != co.c.owner {
			held[ls.Owner] = append(held[ls.Owner], id)
		}
	}
	owners := slices.Sorted(maps.Keys(held))
	// Most loaded first; ties by id, so the order is the same everywhere.
	slices.SortStableFunc(owners, func(a, b string) int { return len(held[b]) - len(held[a]) })
	want := share - mine
	for _, m := range owners {
		if want <= 0 || len(held[m])-mine < 2 {
			break
		}
		shards := held[m]
		rand.Shuffle(len(shards), func(i, j int) { shards[i], shards[j] = shards[j], shards[i] })
		for _, shard := range shards[:min(want, max(len(shards)-share, 1))] {
			if err := co.store.RequestHandoff(ctx, shard, co.c.owner); err != nil {
				co.log.Warnf("Requesting hand-off of shard %s failed: %v", shard, err)
				return
			}
			want--
		}
	}
}

// shuttingDown says the instance is stopping (shutdown began), as opposed
// to handing shards over while it goes on reading others.
func (co *coordinator) shuttingDown() bool {
	select {
	case <-co.stopReq:
		return true
	default:
		return false
	}
}
