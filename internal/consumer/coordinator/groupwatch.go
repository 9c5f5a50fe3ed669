package coordinator

import (
	"context"
	"errors"
	"sync"
	"time"

	"github.com/connect-kinesis/connect-kinesis/internal/consumer"
)

// join joins the group before the first take and sets when this instance
// may take its first shard. A new group's wait is no fault, so it is said
// plainly at INFO, and why at DEBUG. A stream the patterns of `streams`
// found (co.found) has checkpoints of its own, in a group that may well
// run already: its wait is said as the stream's, not as a new group's.
func (co *coordinator) join(ctx context.Context) error {
	wait, err := co.store.Join(ctx)
	if err != nil {
		return err
	}
	co.takeAfter = time.Now().Add(wait)
	if wait <= 0 {
		return nil
	}
	w := wait.Round(time.Millisecond)
	what := "New consumer group"
	if co.found {
		what = "Stream " + co.streamName + " found by the patterns of streams"
	}
	var s consumer.Store = co.store
	if fw, ok := s.(forgetWatch); ok {
		s = fw.Store
	}
	if y, ok := s.(consumer.YoungServer); ok {
		if up, young := y.JoinedYoungServer(); young {
			co.log.Infof("%s, on a Redis that started %v ago: taking its first shards in %v, once Redis has been up a lease period and %v", what, up, w, consumer.NewcomerWait(co.c.cfg.LeasePeriod))
			co.log.Debugf("The group's record in the checkpoint store is new and no instance re-seeded it, and Redis started %v ago. A Redis that restarted empty looks the same, and instances that were paused or cut off while it restarted may still hold shards: each wakes within its lease period and writes back where it got to, so this instance takes no shard for %v", up, w)
			return nil
		}
	}
	if co.found {
		co.log.Infof("%s: taking its first shards in %v (the group's checkpoints of a stream are new at its first take, and new checkpoints wait this once)", what, w)
	} else {
		co.log.Infof("%s: taking its first shards in %v (a new group waits this once before its first take)", what, w)
	}
	co.log.Debugf("The group's record in the checkpoint store is new and no instance re-seeded it. A store that just came back empty (Redis restarted or flushed) looks the same, so this instance takes no shard for %v: instances still reading check the record every %v and write back where they got to first",
		w, consumer.GroupCheckInterval(co.c.cfg.LeasePeriod))
	return nil
}

// watchGroup has the consumer's shared rounds (sharedRounds) check this
// stream's group record every GroupCheckInterval while this instance reads
// any of its shards, handing a store that forgot to the renew goroutine,
// which re-seeds it, and heartbeat this member in the stream's group every
// third of the lease period when the store heartbeats every stream in one
// call. It returns when stop is closed.
func (co *coordinator) watchGroup(stop <-chan struct{}) {
	var s consumer.Store = co.store
	if w, ok := s.(forgetWatch); ok {
		s = w.Store
	}
	_, checks := s.(consumer.GroupChecker)
	_, beats := s.(consumer.HeartbeatsBatcher)
	_, renews := s.(consumer.RenewalsBatcher)
	_, rounds := s.(consumer.RoundsReader)
	if !checks && !beats && !renews && !rounds {
		return
	}
	co.sharedBeat.Store(beats)
	co.sharedRenew.Store(renews)
	co.sharedRound.Store(rounds)
	defer co.sharedRenew.Store(false)
	defer co.sharedRound.Store(false)
	co.c.shared.add(co, s, co.c.cfg.LeasePeriod)
	defer co.c.shared.remove(co)
	select {
	case <-stop:
	case <-co.runCtx.Done():
	}
}

// sharedRounds does, once for every stream of the consumer, what each
// stream needs of the store at a fixed pace and the same for all: the
// group check every check interval (for the streams it reads shards of),
// and every third of the lease period the member's heartbeat, the
// renewal of the leases and the published progress. One call does each
// for every stream where the store can batch (consumer.GroupsChecker,
// HeartbeatsBatcher, RenewalsBatcher, ProgressBatcher: a Redis that is not
// a Cluster), so an instance pays them once however many streams it reads. Checks and
// heartbeats run apart, so a heartbeat that hangs (bounded by a sixth of
// the lease) never delays a check past the newcomer's wait. They run
// while any stream is watched.
type sharedRounds struct {
	mu      sync.Mutex
	watched map[*coordinator]consumer.Store
	// checking, beating and balancing say that each loop runs.
	checking, beating, balancing bool
}

// roundRead is a stream's balancing round as the shared rounds read it,
// at at, for its coordinator's run loop (balanceWith).
type roundRead struct {
	round consumer.Round
	err   error
	at    time.Time
}

func (w *sharedRounds) add(co *coordinator, s consumer.Store, leasePeriod time.Duration) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.watched == nil {
		w.watched = map[*coordinator]consumer.Store{}
	}
	w.watched[co] = s
	if !w.checking {
		w.checking = true
		every := consumer.GroupCheckInterval(leasePeriod)
		go w.loop(every, &w.checking, true, func(coords []*coordinator, stores []consumer.Store) { w.check(coords, stores, every) })
	}
	if !w.beating {
		w.beating = true
		go w.loop(leasePeriod/3, &w.beating, false, func(coords []*coordinator, stores []consumer.Store) {
			// Renewals first: a heartbeat that hangs must not delay them.
			renewed, renewedStores := w.renew(coords, stores, leasePeriod/6)
			w.heartbeat(coords, stores, leasePeriod/6)
			w.publish(renewed, renewedStores, leasePeriod/6)
		})
	}
	if _, ok := s.(consumer.RoundsReader); ok && !w.balancing {
		w.balancing = true
		every, bound := co.c.cfg.RebalancePeriod, leasePeriod/3
		go w.loop(every, &w.balancing, false, func(coords []*coordinator, stores []consumer.Store) { w.balance(coords, stores, bound) })
	}
}

func (w *sharedRounds) remove(co *coordinator) {
	w.mu.Lock()
	defer w.mu.Unlock()
	delete(w.watched, co)
}

// snapshot returns the watched streams whose coordinator still runs, and
// with reading only those that read any shard; ok is false when none is
// watched, and the loop whose flag running is then ends.
func (w *sharedRounds) snapshot(running *bool, reading bool) (coords []*coordinator, stores []consumer.Store, ok bool) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if len(w.watched) == 0 {
		*running = false
		return nil, nil, false
	}
	for co, s := range w.watched {
		if co.runCtx.Err() == nil && (!reading || len(co.readersNow()) > 0) {
			coords = append(coords, co)
			stores = append(stores, s)
		}
	}
	return coords, stores, true
}

// loop runs round every interval until no stream is watched.
func (w *sharedRounds) loop(every time.Duration, running *bool, reading bool, round func([]*coordinator, []consumer.Store)) {
	t := time.NewTicker(every)
	defer t.Stop()
	for range t.C {
		coords, stores, ok := w.snapshot(running, reading)
		if !ok {
			return
		}
		round(coords, stores)
	}
}

// pick returns the coordinators, and their stores, whose store keep
// accepts: the streams a shared call covers.
func pick(coords []*coordinator, stores []consumer.Store, keep func(consumer.Store) bool) ([]*coordinator, []consumer.Store) {
	return pickBy(coords, stores, func(_ *coordinator, s consumer.Store) bool { return keep(s) })
}

// pickBy is pick deciding on the coordinator too.
func pickBy(coords []*coordinator, stores []consumer.Store, keep func(*coordinator, consumer.Store) bool) ([]*coordinator, []consumer.Store) {
	var cs []*coordinator
	var ss []consumer.Store
	for i, s := range stores {
		if keep(coords[i], s) {
			cs, ss = append(cs, coords[i]), append(ss, s)
		}
	}
	return cs, ss
}

// check checks each coordinator's group record, bounded by half the
// interval so that a check that hangs never delays the next.
func (w *sharedRounds) check(coords []*coordinator, stores []consumer.Store, every time.Duration) {
	checked, checkers := pick(coords, stores, func(s consumer.Store) bool {
		_, ok := s.(consumer.GroupChecker)
		return ok
	})
	if len(checked) == 0 {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), every/2)
	defer cancel()
	var errs []error
	if g, ok := checkers[0].(consumer.GroupsChecker); ok {
		errs = g.CheckGroups(ctx, checkers)
	} else {
		errs = make([]error, len(checkers))
		for i, s := range checkers {
			errs[i] = s.(consumer.GroupChecker).CheckGroup(ctx)
		}
	}
	for i, err := range errs {
		co := checked[i]
		if errors.Is(err, consumer.ErrStoreForgot) {
			co.storeForgot()
		} else if err != nil && co.runCtx.Err() == nil {
			co.log.Debugf("Checking the group record failed; the renewals report an outage: %v", err)
		}
	}
}

// heartbeat heartbeats the member in every stream whose store batches
// heartbeats, bounded as a renewal is.
func (w *sharedRounds) heartbeat(coords []*coordinator, stores []consumer.Store, bound time.Duration) {
	beat, batched := pick(coords, stores, func(s consumer.Store) bool {
		_, ok := s.(consumer.HeartbeatsBatcher)
		return ok
	})
	if len(beat) == 0 {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), bound)
	defer cancel()
	errs := batched[0].(consumer.HeartbeatsBatcher).HeartbeatAll(ctx, beat[0].c.owner, batched)
	// One call failing fails every stream it covered with the same error:
	// it is logged once, not once per stream.
	said := map[string]bool{}
	for i, err := range errs {
		if co := beat[i]; err != nil && co.runCtx.Err() == nil && !said[err.Error()] {
			said[err.Error()] = true
			co.log.Warnf("Heartbeat failed: %v", err)
		}
	}
}

// renew renews, in one call, the leases of every stream whose renewals
// the shared rounds make (sharedRenew), bounded as a renewal is; each
// stream then acts on its answer as renewLoop's renewal would. It returns
// those streams, whose progress is published next.
func (w *sharedRounds) renew(coords []*coordinator, stores []consumer.Store, bound time.Duration) ([]*coordinator, []consumer.Store) {
	var renewing []*coordinator
	var batched []consumer.Store
	var sent []leaseRenewal
	var leases [][]consumer.Lease
	var all []*coordinator
	var allStores []consumer.Store
	for i, co := range coords {
		if !co.sharedRenew.Load() {
			continue
		}
		all, allStores = append(all, co), append(allStores, stores[i])
		rn := co.renewalToSend()
		if len(rn.leases) == 0 {
			co.renewal.succeeded(rn.attempt)
			continue
		}
		renewing, batched = append(renewing, co), append(batched, stores[i])
		sent, leases = append(sent, rn), append(leases, rn.leases)
	}
	if len(renewing) > 0 {
		ctx, cancel := context.WithTimeout(context.Background(), bound)
		res := batched[0].(consumer.RenewalsBatcher).RenewStreams(ctx, renewing[0].c.owner, batched, leases)
		cancel()
		// A re-seed or a stop of lost readers in one stream must not hold
		// up the others.
		var wg sync.WaitGroup
		for i, co := range renewing {
			wg.Go(func() {
				ctx, cancel := context.WithTimeout(co.runCtx, bound)
				defer cancel()
				co.renewedWith(ctx, sent[i], res[i])
			})
		}
		wg.Wait()
	}
	return all, allStores
}

// publish publishes the progress of every stream the shared rounds renew.
func (w *sharedRounds) publish(coords []*coordinator, stores []consumer.Store, bound time.Duration) {
	var pub []*coordinator
	var pubStores []consumer.Store
	var ps []map[string]consumer.Progress
	for i, co := range coords {
		if p := co.progressToPublish(); len(p) > 0 {
			pub, pubStores, ps = append(pub, co), append(pubStores, stores[i]), append(ps, p)
		}
	}
	if len(pub) == 0 {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), bound)
	defer cancel()
	errs := make([]error, len(pub))
	if b, ok := pubStores[0].(consumer.ProgressBatcher); ok {
		errs = b.PublishProgressAll(ctx, pub[0].c.owner, pubStores, ps)
	} else {
		for i, s := range pubStores {
			errs[i] = s.PublishProgress(ctx, pub[i].c.owner, ps[i])
		}
	}
	for i, err := range errs {
		if co := pub[i]; err != nil && co.runCtx.Err() == nil {
			co.log.Debugf("Publishing shard progress failed: %v", err)
		}
	}
}

// balance reads, in one call, the balancing round of every stream whose
// store reads rounds together (consumer.RoundsReader: a Redis that is not
// a Cluster), and hands each to its coordinator's run loop, which balances
// the stream on it as its own ticker's round would (a stream that forgot
// is re-seeded there). Balancing by load, the same call reads the shards'
// loads. An instance reading a hundred streams then pays one call a
// balancing period for their rounds, not two hundred. A round not
// yet taken is replaced by the newer one.
func (w *sharedRounds) balance(coords []*coordinator, stores []consumer.Store, bound time.Duration) {
	balanced, batched := pickBy(coords, stores, func(co *coordinator, s consumer.Store) bool {
		_, ok := s.(consumer.RoundsReader)
		return ok && co.sharedRound.Load()
	})
	if len(balanced) == 0 {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), bound)
	defer cancel()
	at := time.Now()
	byLoad := balanced[0].c.cfg.Balance != consumer.BalanceCount
	rounds, errs := batched[0].(consumer.RoundsReader).ReadRounds(ctx, balanced[0].c.owner, batched, byLoad)
	// A call that failed fails every stream it covered with the same
	// error: it is logged here once, and no stream balances this round
	// (as each would have skipped it). A stream whose record is gone has
	// an answer of its own, which its run loop acts on.
	if failed := oneFailure(errs); failed != nil {
		if balanced[0].runCtx.Err() == nil {
			balanced[0].log.Warnf("Reading the balancing round's state failed: %v", failed)
		}
		return
	}
	for i, co := range balanced {
		sr := roundRead{round: rounds[i], err: errs[i], at: at}
		select {
		case <-co.rounds: // an older round not yet taken
		default:
		}
		select {
		case co.rounds <- sr:
		default:
		}
	}
}

// oneFailure is the error of a batched call that failed as a whole: every
// stream's answer is the same error, and none is a store that forgot.
func oneFailure(errs []error) error {
	if len(errs) == 0 || errs[0] == nil {
		return nil
	}
	for _, err := range errs {
		if err == nil || err.Error() != errs[0].Error() || errors.Is(err, consumer.ErrStoreForgot) {
			return nil
		}
	}
	return errs[0]
}
