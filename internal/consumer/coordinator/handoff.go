package coordinator

import (
	"context"
	"errors"
	"maps"
	"net"
	"slices"
	"time"

	"github.com/connect-kinesis/connect-kinesis/internal/consumer"
)

// handOverRequested stops the readers of shards that other members asked
// for (reqs, read with the round), at most spare of them, so this instance keeps at least its floor
// share, and only those allow lets go (nil: all). A stopped reader commits
// and releases; the requester then takes the shard. It returns how many it
// handed over, and notes each in ev.
func (co *coordinator) handOverRequested(reqs map[string]string, spare int, allow func(shard, requester string) bool, ev *roundEvents) int {
	n := 0
	for _, id := range slices.Sorted(maps.Keys(reqs)) {
		r := co.readers[id]
		if r == nil || r.Stopping() || n >= spare || (allow != nil && !allow(id, reqs[id])) {
			continue
		}
		ev.handOver(id, reqs[id])
		r.Stop()
		co.handedOff[id] = time.Now()
		n++
	}
	return n
}

// handOverSurplus, balancing by count, hands over shards nobody asked for,
// up to surplus (what this instance holds above its quota), once a member
// asked for any of its shards this round: each to the first requester that
// allow lets have it, so no requester ends within one shard of this
// instance. Members plan their asks from the members they see
// (planCountAsks), and as a group starts each sees a different number: their
// asks overlap, the store keeps one requester a shard, and the holders were
// asked for fewer shards than the group lacked, the rest a period later (a
// group of 20 started over 10 s: balanced 21 s after the last start, 11 s
// when every asker asked the busiest holder). Who asked matters little:
// members below their quota take any free shard. It takes the shards from
// the end of this stream's ready list; the plans ask for the first ones.
// It returns how many it handed over, and notes each in ev.
func (co *coordinator) handOverSurplus(reqs map[string]string, ready []string, surplus int, allow func(shard, requester string) bool, ev *roundEvents) int {
	if surplus <= 0 || len(reqs) == 0 {
		return 0
	}
	requesters := slices.Compact(slices.Sorted(maps.Values(reqs)))
	n := 0
	for i := len(ready) - 1; i >= 0 && n < surplus; i-- {
		id := ready[i]
		r := co.readers[id]
		if _, asked := reqs[id]; asked || r == nil || r.Stopping() {
			continue
		}
		for _, req := range requesters {
			if allow(id, req) {
				ev.handOver(id, req)
				r.Stop()
				co.handedOff[id] = time.Now()
				n++
				break
			}
		}
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
// quota for this stream's shards that this instance's plan gives it
// (planCountAsks), want at most (this instance's shortfall, less what its
// other streams asked for). members and total are the round's, held counts
// every member's ready shards over every stream the round balances
// together (tally.go). It returns how many it asked for.
func (co *coordinator) askForHandOff(ctx context.Context, leases map[string]consumer.LeaseState, ready, members []string, total int, held map[string]int, want int) int {
	if want <= 0 {
		return 0
	}
	here, free := map[string][]string{}, 0
	for _, id := range ready {
		// ready is sorted (readyShards), so each holder's list is too.
		switch ls := leases[id]; {
		case ls.Expired || ls.Owner == "":
			if co.readers[id] == nil {
				free++
			}
		case ls.Owner != co.c.owner:
			here[ls.Owner] = append(here[ls.Owner], id)
		}
	}
	ask := planCountAsks(members, total, free, held, here, co.c.owner)
	return co.requestHandoffs(ctx, ask[:min(len(ask), want)])
}

// planCountAsks is balancing by count as one plan that every member works
// out alike from the round: which shards each member below its quota asks
// for, and of whom. It returns self's part. The quotas are the takes' (the
// floor share, plus one for each of the first total % members members in
// id order). The members below their quota, in id order, each take their
// shortfall from the members above theirs, most loaded first, and never so
// much that the giver would hold fewer than the asker (a holder hands a
// shard over only while it holds at least two more than the requester,
// handOverRequested's rule by count). From each giver the askers take
// consecutive runs of its shards in id order, so members that ask at once
// ask different holders, or different shards of one: when every member
// asked the busiest holder for its whole shortfall, that holder released
// its surplus once, the first asker to run a round took it, and the group
// reached its shares one member per balancing period (a 2,000-shard run
// over 20 instances: the last five one period apart, 80 s after the last
// start). here holds, sorted, the ready shards of this stream each other
// member holds; held counts over every stream balanced together, so a
// giver's surplus may lie in another stream, whose round asks for it.
func planCountAsks(members []string, total, free int, held map[string]int, here map[string][]string, self string) []string {
	n := len(members)
	if n == 0 {
		return nil
	}
	quota := func(i int) int {
		if i < total%n {
			return total/n + 1
		}
		return total / n
	}
	type giver struct {
		id         string
		held, left int // shards held, and above its quota, as the plan goes
		next       int // the first of its shards in here not yet planned
	}
	var givers []*giver
	for i, m := range members {
		if over := held[m] - quota(i); over > 0 {
			givers = append(givers, &giver{id: m, held: held[m], left: over})
		}
	}
	// Most loaded first; ties by id, so the order is the same everywhere.
	slices.SortStableFunc(givers, func(a, b *giver) int { return b.held - a.held })
	var mine []string
	for i, m := range members {
		need, has := quota(i)-held[m], held[m]
		if need > 0 && free > 0 {
			k := min(need, free)
			free -= k
			need -= k
			has += k
		}
		for _, g := range givers {
			if need <= 0 {
				break
			}
			k := min(need, g.left, (g.held-has)/2, len(here[g.id])-g.next)
			if g.id == m || k <= 0 {
				continue
			}
			if m == self {
				mine = append(mine, here[g.id][g.next:g.next+k]...)
			}
			g.next += k
			g.left -= k
			g.held -= k
			has += k
			need -= k
		}
		if m == self {
			break
		}
	}
	return mine
}

// requestHandoffs asks for shards' hand-off, in one call where the store
// can (consumer.HandoffRequestsBatcher), and returns how many it asked for.
// A failure is warned of once. A call that timed out may have run, its
// requests standing for the holders to meet, so its shards count as asked:
// counted as not asked, they let the consumer's other streams ask for the
// same shortfall again (tally.go), shards their holders would release and
// no member's quota take.
func (co *coordinator) requestHandoffs(ctx context.Context, shards []string) int {
	if len(shards) == 0 {
		return 0
	}
	var s consumer.Store = co.store
	if w, ok := s.(forgetWatch); ok {
		s = w.Store
	}
	if b, ok := s.(consumer.HandoffRequestsBatcher); ok {
		// A call made once the round's time was up sent nothing.
		sent := ctx.Err() == nil
		if err := b.RequestHandoffs(ctx, shards, co.c.owner); err != nil {
			co.log.Warnf("Requesting hand-off of %d shards failed: %v", len(shards), err)
			if sent && mayHaveRun(err) {
				return len(shards)
			}
			return 0
		}
		return len(shards)
	}
	for i, shard := range shards {
		sent := ctx.Err() == nil
		if err := co.store.RequestHandoff(ctx, shard, co.c.owner); err != nil {
			co.log.Warnf("Requesting hand-off of shard %s failed: %v", shard, err)
			if sent && mayHaveRun(err) {
				return i + 1
			}
			return i
		}
	}
	return len(shards)
}

// mayHaveRun says a store call's failure leaves its outcome unknown: it
// timed out, so the call may have reached the store and run there.
func mayHaveRun(err error) bool {
	var netErr net.Error
	return errors.Is(err, context.DeadlineExceeded) || (errors.As(err, &netErr) && netErr.Timeout())
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
