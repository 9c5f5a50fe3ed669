package consumer

import (
	"context"
	"errors"
	"slices"
	"time"
)

// rebalance runs one balancing round: it takes free ready shards up to
// this instance's fair share (ceil(ready / live members)), hands shards over
// to members below their share that asked for them, and, when nothing is
// free, asks the members above their share for the shards it lacks.
func (co *coordinator) rebalance(ctx context.Context) {
	if ctx.Err() != nil || time.Now().Before(co.takeAfter) {
		return
	}
	members, err := co.liveMembers(ctx)
	if err != nil {
		co.log.Warnf("Listing live members failed: %v", err)
		return
	}
	closed, err := co.store.ClosedShards(ctx)
	if err != nil {
		if !errors.Is(err, ErrStoreForgot) {
			co.log.Warnf("Reading closed shards failed: %v", err)
		}
		return
	}
	co.noteClosed(closed)
	leases, err := co.store.Leases(ctx)
	if err != nil {
		co.log.Warnf("Reading leases failed: %v", err)
		return
	}
	ready := readyShards(co.listed, closed)
	share := (len(ready) + members - 1) / members
	floor := len(ready) / members
	mine := co.readingCount()
	mine -= co.handOverRequested(ctx, mine-floor)
	co.forgetOldHandOffs()
	took := co.takeFree(ctx, ready, leases, share-mine)
	mine += took
	co.c.metrics.owned.Set(int64(len(co.readers)), co.streamName)
	co.reportUnowned(ready, leases)
	if took > 0 || mine >= share {
		return
	}
	co.askForHandOff(ctx, ready, leases, mine, share)
}

// liveMembers counts the live members of the group, this instance
// included even before its first heartbeat lands.
func (co *coordinator) liveMembers(ctx context.Context) (int, error) {
	live, err := co.store.LiveMembers(ctx)
	if err != nil {
		return 0, err
	}
	if !slices.Contains(live, co.c.owner) {
		return len(live) + 1, nil
	}
	return len(live), nil
}

// readingCount is the number of shards this instance reads and is not
// giving up.
func (co *coordinator) readingCount() int {
	n := 0
	for _, r := range co.readers {
		if !r.stopping.Load() {
			n++
		}
	}
	return n
}

// takeFree takes up to want ready shards that nobody else holds, skipping
// those this instance just handed over. It returns how many it took.
func (co *coordinator) takeFree(ctx context.Context, ready []string, leases map[string]LeaseState, want int) int {
	took := 0
	for _, id := range ready {
		if took >= want {
			break
		}
		if co.readers[id] != nil {
			continue
		}
		if _, recent := co.handedOff[id]; recent {
			continue
		}
		if ls, held := leases[id]; held && !ls.Expired && ls.Owner != co.c.owner {
			continue
		}
		if co.take(ctx, id) {
			took++
		}
	}
	return took
}
