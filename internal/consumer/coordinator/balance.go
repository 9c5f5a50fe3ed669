package coordinator

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"time"

	"github.com/connect-kinesis/connect-kinesis/internal/consumer"
)

// rebalance runs one balancing round: it takes free ready shards up to
// this instance's quota (balanceWith), and those free for a balancing
// period and a half up to the fair share by count (ceil(ready / live
// members)), hands shards over to members that asked for them, and asks
// other members for shards. Balancing by load (load.go) decides the
// asking by bytes/s; balancing by count (and a round where loads are not
// known) asks the members above their share for the shards this instance
// lacks.
func (co *coordinator) rebalance(ctx context.Context) {
	if ctx.Err() != nil || time.Now().Before(co.takeAfter) {
		return
	}
	rd, err := co.readRound(ctx)
	co.balanceWith(ctx, rd, err)
}

// balanceWith runs a balancing round on the state read of the stream (by
// this coordinator, or by the shared rounds with every other stream's):
// it logs what failed, and a store that forgot is handed to the re-seed.
func (co *coordinator) balanceWith(ctx context.Context, rd consumer.Round, err error) {
	if ctx.Err() != nil || time.Now().Before(co.takeAfter) {
		return
	}
	if err != nil {
		if errors.Is(err, consumer.ErrStoreForgot) {
			co.storeForgot()
		} else if co.runCtx.Err() == nil {
			co.log.Warnf("Reading the balancing round's state failed: %v", err)
		}
		return
	}
	// The consumer's streams balance one at a time, each on the tally as
	// the one before left it (tally.go).
	end := co.c.tally.take(ctx)
	if end == nil {
		return
	}
	defer end()
	if !slices.Contains(rd.Members, co.c.owner) {
		rd.Members = append(rd.Members, co.c.owner)
	}
	slices.Sort(rd.Members)
	members, closed, leases := rd.Members, rd.Closed, rd.Leases
	co.known.superseded(leases)
	co.known.noteReopened(rd.Reopened)
	closed, missing := co.noteClosed(closed, leases)
	if len(missing) > 0 {
		for _, id := range co.writeBackClosed(ctx, missing) {
			delete(closed, id)
		}
	}
	co.pruneUnlisted(ctx, closed, leases)
	ready := readyShards(co.listed, closed)
	co.noteReady(ready, closed)
	co.stopGatedReaders(closed)
	// The shares are taken over every stream the same members read
	// (tally.go): with one stream, over its shards alone.
	other := co.c.tally.others(co.id, members, askPendingRounds*co.c.cfg.RebalancePeriod)
	total := len(ready) + other.ready
	share := (total + len(members) - 1) / len(members)
	floor := total / len(members)
	view, byLoad := co.loadView(ctx, members, ready, leases, rd.Loads)
	view.others = other.loads
	mine := co.readingCount(ready)
	spare := mine + other.held[co.c.owner] - floor
	var allow func(shard, requester string) bool
	if byLoad {
		// Balancing by load hands over what the move evens out, checked
		// against this instance's view too (a request may be older than
		// the loads); the count floor would refuse the hand-off of a hot
		// shard between two members with even counts.
		spare, allow = mine, view.givingEvensOut(co.c.owner)
		if len(co.moved) > 0 {
			// While a shard this instance saw move cools down, the rates
			// of the members that traded it are not measured anew (a new
			// reader's first rate covers part of a window), so a request,
			// perhaps one left from a shortfall by count made up since,
			// waits as asking does.
			allow = func(string, string) bool { return false }
		}
	} else {
		// By count a request is honoured only while it evens out as the
		// asking rule has it: the requester holds at least two fewer
		// shards than this instance. A request stays in the store until
		// it is met, so one left from a shortfall its requester made up
		// since would otherwise move a shard of a group that settled.
		counts := addHeld(heldCounts(ready, leases, co.c.owner, mine), other.held)
		allow = func(_, requester string) bool {
			if counts[co.c.owner]-counts[requester] < 2 {
				return false
			}
			counts[co.c.owner]--
			counts[requester]++
			return true
		}
	}
	var ev roundEvents
	mine -= co.handOverRequested(rd.Handoffs, spare, allow, &ev)
	quota := floor
	if slices.Index(members, co.c.owner) < total%len(members) {
		quota++
	}
	// A round that balances by count only because this instance could not
	// read the loads hands over no surplus: the group's other members
	// balance by load, with counts uneven by design, and would take the
	// shards up to their quotas by count and move them back by load.
	// Rounds every member balances by count (balancing by count, no load
	// read, an owner publishing none) hand it over.
	if !byLoad && !view.unread {
		mine -= co.handOverSurplus(rd.Handoffs, ready, mine+other.held[co.c.owner]-quota, allow, &ev)
	}
	co.forgetOldHandOffs()
	// Free shards are taken up to this instance's quota, the floor share
	// plus one for each of the first total % members members in id order,
	// so the quotas add up to the total: after a member died, the
	// survivors' takes of its shards balance the group, and none is left
	// below the floor to ask another survivor for shards of its own. A
	// shard the rounds found free for a balancing period and a half (the
	// member it fell to did not take it) is taken up to the rounded-up
	// share, so none stays unowned. The wait is longer than a period, so
	// that every live member has run a round on the shard first: the
	// member whose quota it fills takes it then, even one whose previous
	// round still counted the members a failover removed. Half a period
	// let the other survivors take it beyond their quotas first, and that
	// member then asked them for shards back, moving a live shard.
	held := mine + other.held[co.c.owner]
	took := co.takeFree(ctx, ready, leases, quota-held, nil, &ev)
	long := map[string]bool{}
	for id, since := range co.freeSince {
		if time.Since(since) >= longFree(co.c.cfg.RebalancePeriod) {
			long[id] = true
		}
	}
	took += co.takeFree(ctx, ready, leases, share-held-took, long, &ev)
	co.noteFree(ready, leases)
	took += co.takeAsked(ctx, leases, &ev)
	co.logRound(&ev)
	mine += took
	co.c.metrics.Owned.Set(int64(len(co.readers)), co.streamName)
	co.reportUnowned(ready, leases)
	round := streamTally{members: memberKey(members), ready: len(ready), held: heldCounts(ready, leases, co.c.owner, mine)}
	defer func() { co.c.tally.set(co.id, round) }()
	if byLoad {
		round.loads = memberLoads(view)
		if !other.settling {
			co.askByLoad(ctx, view)
		}
		round.settling = len(co.moved) > 0 || len(co.asked) > 0
		return
	}
	// Shards are asked for up to the quota, as free ones are taken: a
	// shard asked for beyond it would be released by its holder and left
	// free until another member's quota took it.
	if mine+other.held[co.c.owner] >= quota {
		return
	}
	round.askedAt = time.Now()
	round.asked = co.askForHandOff(ctx, leases, ready, members, total, addHeld(round.held, other.held), quota-other.asked-(mine+other.held[co.c.owner]))
}

// readRound reads what a balancing round needs of the stream: in one call
// where the store can (consumer.RoundReader), else in four. The members
// are sorted, with this instance added (balanceWith) even before its first
// heartbeat lands.
func (co *coordinator) readRound(ctx context.Context) (consumer.Round, error) {
	var s consumer.Store = co.store
	if w, ok := s.(forgetWatch); ok {
		s = w.Store
	}
	if rr, ok := s.(consumer.RoundReader); ok {
		return rr.ReadRound(ctx, co.c.owner)
	}
	var rd consumer.Round
	var err error
	if rd.Members, err = co.store.LiveMembers(ctx); err != nil {
		return rd, fmt.Errorf("listing live members: %w", err)
	}
	if rd.Closed, err = co.store.ClosedShards(ctx); err != nil {
		return rd, fmt.Errorf("reading closed shards: %w", err)
	}
	if re, ok := s.(consumer.ReopenedReader); ok {
		if rd.Reopened, err = re.ReopenedShards(ctx); err != nil {
			return rd, fmt.Errorf("reading the shards a re-seed reopened: %w", err)
		}
	}
	if rd.Leases, err = co.store.Leases(ctx); err != nil {
		return rd, fmt.Errorf("reading leases: %w", err)
	}
	if rd.Handoffs, err = co.store.HandoffRequests(ctx, co.c.owner); err != nil {
		// The round goes on without: nothing is handed over.
		co.log.Warnf("Reading hand-off requests failed: %v", err)
	}
	return rd, nil
}

// readingCount is the number of ready shards this instance reads and is
// not giving up. A reader of a shard that is not ready (read to its end,
// no longer listed, or a child whose parent is listed unread) fills no
// share: counted, it kept one instance from taking the parent it waits
// for.
func (co *coordinator) readingCount(ready []string) int {
	n := 0
	for id, r := range co.readers {
		if _, ok := slices.BinarySearch(ready, id); ok && !r.Stopping() {
			n++
		}
	}
	return n
}

// stopGatedReaders stops, with a final commit, the readers of shards one
// of whose parents is listed and not closed: a child taken while a listing
// left its parent out (as if trimmed), or whose parent's closed mark the
// store lost with nobody to write it back. Reading on would deliver more
// of the child before the parent's records; stopped, the child waits for
// its parent as every child does, and is taken again once the parent is
// read to its end.
func (co *coordinator) stopGatedReaders(closed map[string]bool) {
	for _, id := range slices.Sorted(maps.Keys(co.readers)) {
		r := co.readers[id]
		s, listed := co.listed[id]
		if r.Stopping() || !listed {
			continue
		}
		for _, p := range s.Parents() {
			if _, parentListed := co.listed[p]; parentListed && !closed[p] {
				co.log.With("shard", id).Warnf("Stopping the shard's reader: its parent %s is listed and not read to its end (a listing left it out, or the store lost its closed mark), so the shard waits for it as every child does; records of the shard already delivered came before the parent's", p)
				r.Stop()
				break
			}
		}
	}
}

// takeFree takes up to want ready shards that nobody holds (only those in
// only, unless only is nil), skipping those this instance just handed
// over, and notes each take in ev. It returns how many it took. A live
// lease under this instance's own id is not taken either: this instance
// reads none of these shards, so another process holds it under the same
// id (the run before a restart, or a copy started with the same
// lease.instance_id), and its lease must run out first, as any other
// owner's (the store refuses the take too).
func (co *coordinator) takeFree(ctx context.Context, ready []string, leases map[string]consumer.LeaseState, want int, only map[string]bool, ev *roundEvents) int {
	if want <= 0 {
		return 0
	}
	var free []string
	for _, id := range ready {
		if co.readers[id] != nil || (only != nil && !only[id]) {
			continue
		}
		if _, recent := co.handedOff[id]; recent {
			continue
		}
		if ls, held := leases[id]; held && !ls.Expired && ls.Owner != "" {
			continue
		}
		free = append(free, id)
	}
	taken := co.takeUpTo(ctx, free, want, ev)
	for _, id := range taken {
		ls, held := leases[id]
		ev.tookFrom(id, ls, held)
	}
	return len(taken)
}

// longFree is how long the rounds must find a shard free before they take
// it beyond this instance's quota: a balancing period and a half.
func longFree(rebalance time.Duration) time.Duration { return rebalance + rebalance/2 }

// noteFree remembers, for each ready shard nobody holds live and this
// instance does not read, since when consecutive rounds found it free.
func (co *coordinator) noteFree(ready []string, leases map[string]consumer.LeaseState) {
	now, seen := time.Now(), co.freeSince
	co.freeSince = map[string]time.Time{}
	for _, id := range ready {
		ls, held := leases[id]
		if co.readers[id] != nil || (held && !ls.Expired && ls.Owner != "") {
			continue
		}
		if since, ok := seen[id]; ok {
			co.freeSince[id] = since
		} else {
			co.freeSince[id] = now
		}
	}
}
