package consumer

import (
	"context"
	"maps"
	"slices"
	"time"
)

// handOverRequested stops the readers of shards that other members asked
// for, at most spare of them, so this instance keeps at least its floor
// share. A stopped reader commits and releases; the requester then takes
// the shard. It returns how many it handed over.
func (co *coordinator) handOverRequested(ctx context.Context, spare int) int {
	reqs, err := co.store.HandoffRequests(ctx, co.c.owner)
	if err != nil {
		co.log.Warnf("Reading hand-off requests failed: %v", err)
		return 0
	}
	n := 0
	for _, id := range slices.Sorted(maps.Keys(reqs)) {
		r := co.readers[id]
		if r == nil || r.stopping.Load() || n >= spare {
			continue
		}
		co.log.With("shard", id).Debugf("Handing the shard over to %s", reqs[id])
		r.stop()
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

// askForHandOff asks the member holding the most ready shards for one of
// them, when it holds at least two more than this instance's mine.
func (co *coordinator) askForHandOff(ctx context.Context, ready []string, leases map[string]LeaseState, mine int) {
	held := map[string][]string{}
	for id, ls := range leases {
		// ready is sorted (readyShards).
		if _, isReady := slices.BinarySearch(ready, id); isReady && !ls.Expired && ls.Owner != co.c.owner {
			held[ls.Owner] = append(held[ls.Owner], id)
		}
	}
	var most string
	for _, m := range slices.Sorted(maps.Keys(held)) {
		if len(held[m]) > len(held[most]) {
			most = m
		}
	}
	if most == "" || len(held[most])-mine < 2 {
		return
	}
	shard := slices.Max(held[most])
	if err := co.store.RequestHandoff(ctx, shard, co.c.owner); err != nil {
		co.log.Warnf("Requesting hand-off of shard %s failed: %v", shard, err)
	}
}
