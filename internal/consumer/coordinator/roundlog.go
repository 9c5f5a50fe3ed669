package coordinator

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"

	"github.com/connect-kinesis/connect-kinesis/internal/consumer"
)

// What a balancing round says at INFO. A failover, a hand-off and a
// reshard move shards between instances, and an operator watching the
// logs must see each happen without reading one line per shard: a round
// gathers its events and says each kind once (roundEvents.log), naming
// the shards and the members involved.

// roundEvents gathers what one balancing round moved.
type roundEvents struct {
	// lapsed are the shards taken whose lease ran out while a member held
	// it, by that member: it stopped renewing (crashed, paused, cut off).
	lapsed map[string][]string
	// released are the shards taken whose owner had released them (a
	// hand-off, or a stop).
	released []string
	// handedOver are the shards this instance let go because another
	// member asked, by the member that asked.
	handedOver map[string][]string
	// cutShort says the step's deadline (a third of the lease period)
	// passed before every take it meant: the rest waits for the next
	// round.
	cutShort bool
	// taken counts the shards the round took.
	taken int
}

// outOfTime reports whether the step's context is done, so the round
// takes no more: a take with it could only fail. Past the step's deadline
// it notes the round was cut short; at shutdown there is nothing to say.
func (e *roundEvents) outOfTime(ctx context.Context) bool {
	if errors.Is(ctx.Err(), context.DeadlineExceeded) {
		e.cutShort = true
	}
	return ctx.Err() != nil
}

// tookFrom notes a shard this round took, by the lease it replaced (held:
// the store had a lease of it).
func (e *roundEvents) tookFrom(shard string, prev consumer.LeaseState, held bool) {
	e.taken++
	switch {
	case !held:
	case prev.Owner == "":
		e.released = append(e.released, shard)
	default:
		if e.lapsed == nil {
			e.lapsed = map[string][]string{}
		}
		e.lapsed[prev.Owner] = append(e.lapsed[prev.Owner], shard)
	}
}

// handOver notes a shard handed over to requester.
func (e *roundEvents) handOver(shard, requester string) {
	if e.handedOver == nil {
		e.handedOver = map[string][]string{}
	}
	e.handedOver[requester] = append(e.handedOver[requester], shard)
}

// log says each kind of event of the round once, at INFO.
func (co *coordinator) logRound(e *roundEvents) {
	if len(e.lapsed) > 0 {
		var parts []string
		for _, m := range slices.Sorted(maps.Keys(e.lapsed)) {
			parts = append(parts, fmt.Sprintf("%s from member %s", shardList(e.lapsed[m]), m))
		}
		co.log.Infof("Took over shards from members that stopped renewing their leases (a lease runs out lease.period, %v, after its last renewal): %s",
			co.c.cfg.LeasePeriod, strings.Join(parts, "; "))
	}
	if len(e.handedOver) > 0 {
		var parts []string
		for _, m := range slices.Sorted(maps.Keys(e.handedOver)) {
			parts = append(parts, fmt.Sprintf("%s to member %s", shardList(e.handedOver[m]), m))
		}
		co.log.Infof("Handing over shards that other members asked for (each is committed and released first): %s", strings.Join(parts, "; "))
	}
	if len(e.released) > 0 {
		co.log.Infof("Took %s that their previous owners released (a hand-off or a stop)", shardList(e.released))
	}
	switch {
	case e.cutShort && e.taken == 0:
		// Not one take finished in the round's time (a slow or hung
		// Redis). The takes cut short are not each warned of (take), so
		// this line is the operator's sign that free shards stay unread.
		co.log.Warnf("Acquiring shard leases outlasted the balancing round's time (a third of lease.period, %v) and the round took no shard; free shards stay unread until a take finishes in time", co.c.cfg.LeasePeriod/3)
	case e.cutShort:
		co.log.Debugf("The balancing round's time (a third of lease.period, %v) ran out before it took every shard it meant to; the next round takes the rest", co.c.cfg.LeasePeriod/3)
	}
}

// noteReady says at INFO, once per round, which child shards became ready
// because their parents were closed (read to their end, acknowledged and
// committed, by whichever instance read them). The first round after a
// listing only learns what is ready: a child ready long ago is no news.
func (co *coordinator) noteReady(ready []string, closed map[string]bool) {
	if len(co.listed) == 0 {
		return
	}
	seen := co.readySeen
	co.readySeen = make(map[string]bool, len(ready))
	for _, id := range ready {
		co.readySeen[id] = true
	}
	if seen == nil {
		return
	}
	var children []string
	parents := map[string]bool{}
	for _, id := range ready {
		if seen[id] {
			continue
		}
		for _, p := range co.listed[id].Parents() {
			if closed[p] {
				parents[p] = true
				if !slices.Contains(children, id) {
					children = append(children, id)
				}
			}
		}
	}
	if len(children) == 0 {
		return
	}
	co.log.Infof("Parent shards closed (read to their end, acknowledged and committed): %s; their children are ready to read: %s",
		strings.Join(slices.Sorted(maps.Keys(parents)), ", "), shardList(children))
}
