package coordinator

import (
	"context"
	"maps"
	"slices"
	"time"

	"github.com/connect-kinesis/connect-kinesis/internal/consumer"
)

const (
	// loadThreshold is the hysteresis of balancing by load: hand-offs are
	// asked for only while the busiest member reads more than this times
	// the fair load, or the asking member less than the fair load divided
	// by it. Measured rates wobble; a band this wide keeps two members
	// that are nearly even from trading shards back and forth.
	loadThreshold = 1.25
	// loadCoolDownRounds is how many balancing rounds (and at least two
	// lease periods, so two load publishes) the group is left to settle
	// after a shard changed hands, before load moves anything again: a
	// shard's new owner first reads what piled up during the hand-off, and
	// its rate needs a window or two to show the steady load.
	loadCoolDownRounds = 6
)

// loadView is the group as one balancing round sees it.
type loadView struct {
	members []string          // live members, sorted, this instance included
	owners  map[string]string // ready shard -> the live member holding it
	rates   map[string]int64  // shard -> bytes/s
	// others is each member's bytes/s in the other streams balanced
	// together with this one (tally.go); their shards are not this
	// round's to move, but they count in every member's load.
	others map[string]int64
	// unread says this instance could not read the loads this round: it
	// alone balances by count, the other members by load.
	unread bool
}

// planLoadHandOffs picks the shards self should ask for, so that the loads
// of the members even out; none when they are within the hysteresis band
// (loadThreshold). It works greedily on the view: each pick is a shard of
// the busiest other member whose move best closes the gap between that
// member and self, never one whose move would leave self busier than
// loadThreshold times the giver (so the move is not one the giver would
// want reversed), nor one cooling down from its last move. Only a member
// below the fair load (total / members) asks, so the busiest member is the
// one that gives.
func planLoadHandOffs(v loadView, self string, cooling func(shard string) bool) []string {
	loads := make(map[string]int64, len(v.members))
	var total int64
	for _, m := range v.members {
		loads[m] = v.others[m]
		total += v.others[m]
	}
	owners := maps.Clone(v.owners)
	for shard, o := range owners {
		if _, live := loads[o]; live {
			loads[o] += v.rates[shard]
			total += v.rates[shard]
		}
	}
	if total <= 0 || len(v.members) < 2 {
		return nil
	}
	fair := float64(total) / float64(len(v.members))
	shards := slices.Sorted(maps.Keys(owners))
	var asked []string
	for range shards {
		busiest := ""
		for _, m := range v.members {
			if m != self && (busiest == "" || loads[m] > loads[busiest]) {
				busiest = m
			}
		}
		mine, theirs := loads[self], loads[busiest]
		if float64(mine) >= fair {
			break
		}
		if float64(theirs) <= loadThreshold*fair && float64(mine) >= fair/loadThreshold {
			break
		}
		best, bestGap := "", theirs-mine
		for _, shard := range shards {
			x := v.rates[shard]
			if owners[shard] != busiest || cooling(shard) || x <= 0 || float64(mine+x) > loadThreshold*float64(theirs-x) {
				continue
			}
			if gap := abs64(theirs - mine - 2*x); gap < bestGap {
				best, bestGap = shard, gap
			}
		}
		if best == "" {
			break
		}
		asked = append(asked, best)
		owners[best] = self
		loads[busiest] -= v.rates[best]
		loads[self] += v.rates[best]
	}
	return asked
}

// givingEvensOut returns whether giver handing shard to requester evens
// out their loads as planLoadHandOffs would have it: the requester reads
// less than the giver and does not end up busier than loadThreshold times
// the giver.
func (v loadView) givingEvensOut(giver string) func(shard, requester string) bool {
	loads := maps.Clone(v.others)
	if loads == nil {
		loads = map[string]int64{}
	}
	for shard, o := range v.owners {
		loads[o] += v.rates[shard]
	}
	return func(shard, requester string) bool {
		x := v.rates[shard]
		mine, theirs := loads[giver], loads[requester]
		ok := theirs < mine && float64(theirs+x) <= loadThreshold*float64(mine-x)
		if ok {
			loads[giver] -= x
			loads[requester] += x
		}
		return ok
	}
}

func abs64(x int64) int64 {
	if x < 0 {
		return -x
	}
	return x
}

// loadView reads the published loads (unless the round's read carried
// them: published) and returns the round's view, ok
// false when this round balances by count: the setting says so, a member
// holds a shard whose entry carries no load (a release that publishes
// none), or nothing is read at all (no load to balance).
func (co *coordinator) loadView(ctx context.Context, members []string, ready []string, leases map[string]consumer.LeaseState, published map[string]consumer.ShardLoad) (loadView, bool) {
	if co.c.cfg.Balance == consumer.BalanceCount {
		return loadView{}, false
	}
	if published == nil { // the round's read did not carry them
		var err error
		if published, err = co.store.ShardLoads(ctx); err != nil {
			co.log.Warnf("Reading shard loads failed; balancing by shard count this round: %v", err)
			return loadView{unread: true}, false
		}
	}
	v := loadView{members: members, owners: map[string]string{}, rates: map[string]int64{}}
	var total int64
	for _, id := range ready {
		ls, held := leases[id]
		if !held || ls.Expired || ls.Owner == "" {
			continue
		}
		l, ok := published[id]
		if ok && !l.Known {
			return loadView{}, false
		}
		v.owners[id] = ls.Owner
		v.rates[id] = l.BytesPerSecond
		total += l.BytesPerSecond
	}
	co.noteMoves(v.owners)
	// A shard asked for and not yet handed over counts as this instance's
	// already, so the next round does not ask for more than evens out.
	for id := range co.asked {
		if _, ok := v.owners[id]; ok {
			v.owners[id] = co.c.owner
		}
	}
	return v, total > 0
}

// noteMoves remembers when each shard was last seen changing hands, for
// the cool-down of balancing by load.
func (co *coordinator) noteMoves(owners map[string]string) {
	now := time.Now()
	for id, o := range owners {
		if prev, seen := co.lastOwner[id]; seen && prev != o {
			co.moved[id] = now
		}
		co.lastOwner[id] = o
	}
	coolDown := co.loadCoolDown()
	maps.DeleteFunc(co.moved, func(_ string, at time.Time) bool { return now.Sub(at) > coolDown })
}

func (co *coordinator) loadCoolDown() time.Duration {
	return max(loadCoolDownRounds*co.c.cfg.RebalancePeriod, 2*co.c.cfg.LeasePeriod)
}

// askByLoad asks the busiest members for the shards planLoadHandOffs
// picks, and remembers them so that this instance takes them once they are
// released, whatever its share by count. While a shard that changed hands
// cools down, the whole group settles: nothing is asked for, since the
// loads of the members that traded it are not yet measured anew.
func (co *coordinator) askByLoad(ctx context.Context, v loadView) {
	if len(co.moved) > 0 || len(co.asked) > 0 {
		return
	}
	cooling := func(string) bool { return false }
	for _, id := range planLoadHandOffs(v, co.c.owner, cooling) {
		if err := co.store.RequestHandoff(ctx, id, co.c.owner); err != nil {
			co.log.Warnf("Requesting hand-off of shard %s failed: %v", id, err)
			return
		}
		co.log.With("shard", id).Debugf("Asked %s to hand the shard over: it reads %d bytes/s", v.owners[id], v.rates[id])
		co.asked[id] = time.Now()
		co.moved[id] = time.Now()
	}
}

// takeAsked takes the shards this instance asked for that their owners
// have released. A request that was not answered within askWait is
// dropped.
func (co *coordinator) takeAsked(ctx context.Context, leases map[string]consumer.LeaseState, ev *roundEvents) int {
	var free []string
	for _, id := range slices.Sorted(maps.Keys(co.asked)) {
		if co.readers[id] != nil || time.Since(co.asked[id]) > co.askWait() {
			delete(co.asked, id)
			continue
		}
		if ls, held := leases[id]; held && !ls.Expired && ls.Owner != "" {
			continue
		}
		if _, listed := co.listed[id]; listed {
			free = append(free, id)
		}
	}
	// A round out of time takes none of them (takeUpTo), but the lapsed
	// requests were dropped above all the same.
	taken := co.takeUpTo(ctx, free, len(free), ev)
	for _, id := range taken {
		ls, held := leases[id]
		ev.tookFrom(id, ls, held)
		delete(co.asked, id)
	}
	return len(taken)
}

// askWait is how long this instance waits for a shard it asked for by
// load, and takes it once released whatever its share by count. The
// holder honours the request only while the store keeps it
// (consumer.HandoffRequestMaxAge), drains the shard's reader within the
// hand-off timeout, and this instance's next round sees the release
// within a period; one period more covers a round that runs late. Past
// that wait the store has let the request lapse, so no holder releases
// the shard for it later, when nobody would take it.
func (co *coordinator) askWait() time.Duration {
	cfg := co.c.cfg
	return consumer.HandoffRequestMaxAge(cfg.RebalancePeriod) + cfg.HandoffTimeout + 2*cfg.RebalancePeriod
}
