package coordinator

import (
	"context"
	"errors"
	"maps"
	"math/rand/v2"
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

// forgetOldHandOffs lets this instance take again, after two balancing
// rounds, a shard it handed over.
func (co *coordinator) forgetOldHandOffs() {
	maps.DeleteFunc(co.handedOff, func(_ string, at time.Time) bool {
		return time.Since(at) > 2*co.c.cfg.RebalancePeriod
	})
}

// askForHandOff asks the members holding more ready shards than their
// share for some of this stream's, want in all (this instance's shortfall).
// held and mine count over every stream the round balances together
// (tally.go). Each member is asked for what it holds above share, at least
// one, and only while it holds at least two more than this instance, so
// two members one shard apart never trade a shard back and forth. Asking
// for the whole shortfall at once lets an instance that joined late (or
// started a moment after the others and found every shard taken) reach its
// share in a few balancing rounds rather than one shard per round: with
// thousands of shards that is minutes instead of hours. The shards are
// picked at random among a member's, so that several instances asking at
// once mostly ask for different ones. It returns how many it asked for.
func (co *coordinator) askForHandOff(ctx context.Context, ready []string, leases map[string]consumer.LeaseState, held map[string]int, mine, share int) int {
	here := map[string][]string{}
	for id, ls := range leases {
		// ready is sorted (readyShards).
		if _, isReady := slices.BinarySearch(ready, id); isReady && !ls.Expired && ls.Owner != "" && ls.Owner != co.c.owner {
			here[ls.Owner] = append(here[ls.Owner], id)
		}
	}
	owners := slices.Sorted(maps.Keys(here))
	// Most loaded first; ties by id, so the order is the same everywhere.
	slices.SortStableFunc(owners, func(a, b string) int { return held[b] - held[a] })
	want := share - mine
	var ask []string
	for _, m := range owners {
		if want <= 0 || held[m]-mine < 2 {
			break
		}
		shards := here[m]
		rand.Shuffle(len(shards), func(i, j int) { shards[i], shards[j] = shards[j], shards[i] })
		n := min(want, max(held[m]-share, 1), len(shards))
		ask = append(ask, shards[:n]...)
		want -= n
	}
	return co.requestHandoffs(ctx, ask)
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
