package coordinator

import (
	"context"
	"errors"
	"sync"
	"time"

	"github.com/redpanda-data/benthos/v4/public/service"

	"github.com/connect-kinesis/connect-kinesis/internal/consumer"
	"github.com/connect-kinesis/connect-kinesis/internal/consumer/reader"
)

func (co *coordinator) heartbeat(ctx context.Context) {
	if err := co.store.Heartbeat(ctx, co.c.owner); err != nil {
		co.log.Warnf("Heartbeat failed: %v", err)
	}
}

// take acquires a shard's lease, with its checkpoint and the group's start
// in the same call, and starts a reader. It reports whether the shard is
// now read here.
func (co *coordinator) take(ctx context.Context, id string) bool {
	if co.shuttingDown() {
		return false // nothing is taken once the stop began
	}
	t, err := co.store.Acquire(ctx, id, co.c.owner)
	return co.took(ctx, id, t, err)
}

// takeBatch is the most shards one store call takes (consumer.TakesBatcher).
// A balancing round's takes are bound by their round trips, not by Redis's
// work: at 10,000 shards over 20 instances, one call a shard (a few
// milliseconds each on a loaded node) let a round's deadline pass after
// about a hundred. A hundred takes are about as long a script as a renewal
// of a hundred leases, so no call holds the stream's node for long.
const takeBatch = 100

// takeUpTo takes up to want of ids, trying them in order, in calls of up
// to takeBatch shards where the store takes several at once, and returns
// the shards taken. It stops when the round's time runs out (the rest waits
// for the next round) and once the stop began.
func (co *coordinator) takeUpTo(ctx context.Context, ids []string, want int, ev *roundEvents) []string {
	var taken []string
	tb, batched := co.takesBatcher()
	tried := false
	for len(ids) > 0 && len(taken) < want {
		if ev.outOfTime(ctx) || co.shuttingDown() {
			break
		}
		tried = true
		if !batched {
			if co.take(ctx, ids[0]) {
				taken = append(taken, ids[0])
			}
			ids = ids[1:]
			continue
		}
		n := min(len(ids), want-len(taken), takeBatch)
		batch := ids[:n]
		ids = ids[n:]
		rs := tb.AcquireMany(ctx, batch, co.c.owner)
		if err := wholeCallErr(rs); err != nil {
			// One failure of the call, said once rather than once per
			// shard of its batch.
			co.warnTake(ctx, co.log.With("shards", len(batch)), err)
			continue
		}
		for i, r := range rs {
			if co.took(ctx, batch[i], r.Take, r.Err) {
				taken = append(taken, batch[i])
			}
		}
	}
	// The last call may be the one the deadline cut short, with no call
	// after it to notice (a round's only batch, on a Redis that hangs):
	// the round must still say it was cut short. A round with nothing to
	// try took nothing for want of free shards, not of time.
	if tried && len(taken) < want {
		ev.outOfTime(ctx)
	}
	return taken
}

// wholeCallErr returns the error of a batched take that failed as a whole:
// every result carries it (consumer.TakesBatcher), while a shard's own
// failure names its shard. Nil when some shard has an answer of its own.
func wholeCallErr(rs []consumer.TakeResult) error {
	if len(rs) < 2 || rs[0].Err == nil {
		return nil
	}
	for _, r := range rs[1:] {
		if r.Err == nil || r.Err.Error() != rs[0].Err.Error() {
			return nil
		}
	}
	return rs[0].Err
}

// takesBatcher returns the store's batched take, when it has one.
func (co *coordinator) takesBatcher() (consumer.TakesBatcher, bool) {
	if w, ok := co.store.(forgetWatch); ok {
		if tb, ok := w.Store.(consumer.TakesBatcher); ok {
			return forgetWatchTakes{w: w, tb: tb}, true
		}
		return nil, false
	}
	tb, ok := co.store.(consumer.TakesBatcher)
	return tb, ok
}

// took starts a reader of the shard just acquired (err nil), or says why
// not. It reports whether the shard is now read here.
func (co *coordinator) took(ctx context.Context, id string, t consumer.Take, err error) bool {
	if err != nil {
		co.warnTake(ctx, co.log.With("shard", id), err)
		return false
	}
	co.known.take(t)
	shard := co.listed[id]
	start := co.resolveStart(t)
	start.NotBefore = co.firstRead(t)
	start.DeliveredBefore = t.Delivered
	l := t.Lease
	if co.rs == nil {
		co.rs = co.readerStream()
	}
	r := reader.New(co.rs, shard, l, start)
	co.renewal.confirmed(id) // a new take is its own confirmation
	// A take is a move: the shard's rate under this reader is not measured
	// until a full publish window passed, so balancing by load cools down
	// as after a move it saw (noteMoves). Without this, a member that just
	// took a free shard read its partial first rate as a light load and
	// asked a member of a group already settled by count for another.
	co.moved[id] = time.Now()
	co.readersMu.Lock()
	co.readers[id] = r
	co.readersMu.Unlock()
	co.c.metrics.Taken.Incr(1, co.streamName)
	r.Log().Debugf("Took the shard lease (token %d)", l.Token)
	go r.Run()
	go func() {
		<-r.Done()
		select {
		case co.readerDone <- r:
		case <-co.runDone:
		}
	}()
	return true
}

// warnTake warns of a take that failed, unless the lease is live, the
// store forgot (the re-seed answers it) or the step's own deadline cut it
// short, which is not a failure of the store: the round says so once
// (roundEvents.cutShort).
func (co *coordinator) warnTake(ctx context.Context, log *service.Logger, err error) {
	if !errors.Is(err, consumer.ErrLeaseHeld) && !errors.Is(err, consumer.ErrStoreForgot) && ctx.Err() == nil {
		log.Warnf("Acquiring the lease failed: %v", err)
	}
}

// firstRead is the earliest moment a reader that took t may call
// GetRecords. A shard's 5 calls/s are shared by every reader it ever had,
// and the previous one stopped calling before its lease ended. So the first
// call comes no sooner than poll_interval after:
//   - the end of the previous lease, as the store tells (released or
//     expired); a shard idle for longer is read at once;
//   - the shard's last call in this process, which the store cannot know
//     of when it forgot the lease (then a reader here was its only one: a
//     store that forgets makes its holder re-seed its leases before anyone
//     else may take them).
func (co *coordinator) firstRead(t consumer.Take) time.Time {
	poll := co.c.cfg.PollInterval
	at := time.Now()
	if t.Quiet >= 0 {
		at = at.Add(max(0, poll-t.Quiet))
	}
	if last, ok := co.lastRead.Load(t.Shard); ok {
		at = later(at, last.(time.Time).Add(poll))
	}
	return at
}

func later(a, b time.Time) time.Time {
	if b.After(a) {
		return b
	}
	return a
}

// renewLoop renews every third of the lease period, so slow discovery or
// balancing never delays it. Each attempt is bounded by a sixth of the
// period, and so is the progress published after it. A renewal that fails
// stops no reader: past its lease's local deadline a reader neither fetches
// nor delivers (awaitLease) until a renewal confirms the lease, so a Redis
// that stalls or is away costs no re-read. It runs until shutdown has seen
// every reader done (renewStop), not only until the run loop ends. Beside
// it, watchGroup checks the group record every second (groupwatch.go) and
// wakes it through forgot. The periodic renewal runs apart from the loop,
// so a store found to have forgotten is re-seeded at once rather than
// behind a renewal that hangs (on a half-open connection after a failover,
// say: up to a third of the period with the progress, longer than a
// newcomer's wait).
func (co *coordinator) renewLoop() {
	defer close(co.renewDone)
	stopWatch, watched := make(chan struct{}), make(chan struct{})
	go func() {
		defer close(watched)
		co.watchGroup(stopWatch)
	}()
	defer func() {
		close(stopWatch)
		<-watched
	}()
	t := time.NewTicker(co.c.cfg.LeasePeriod / 3)
	defer t.Stop()
	var out chan struct{} // the periodic renewal still running; nil when none
	missed := false       // a tick came while it ran
	defer func() {
		if out != nil {
			<-out
		}
	}()
	periodic := func() {
		done := make(chan struct{})
		out = done
		go func() {
			defer close(done)
			ctx, cancel := context.WithTimeout(co.runCtx, co.c.cfg.LeasePeriod/6)
			co.renew(ctx, false)
			cancel()
			co.publishProgress()
		}()
	}
	for {
		select {
		case <-t.C:
			if co.sharedRenew.Load() {
				// The consumer's shared rounds renew this stream with
				// the others, in one call (groupwatch.go).
				continue
			}
			if out != nil {
				missed = true
				continue
			}
			periodic()
		case <-out:
			out = nil
			if missed {
				missed = false
				periodic()
			}
		case <-co.forgot:
			// A call found the store forgot the group: renewing at once
			// confirms it and re-seeds.
			ctx, cancel := context.WithTimeout(co.runCtx, co.c.cfg.LeasePeriod/6)
			co.renew(ctx, true)
			cancel()
		case <-co.renewStop:
			return
		case <-co.runCtx.Done():
			return
		}
	}
}

// renew heartbeats and renews every held lease in one call. A lease whose
// local deadline passed while Redis could not be reached is renewed like
// any other when nobody took it meanwhile (same owner, same token): its
// reader goes on from what it tracks, delivered and acked, with nothing
// read again. A store that forgot the group is re-seeded (reseed.go);
// forgot says a call already found it so, for an instance that holds no
// lease to renew.
func (co *coordinator) renew(ctx context.Context, forgot bool) {
	// The shared rounds heartbeat every stream in one call, when the store
	// can (groupwatch.go); a store that forgot is heartbeaten at once, so
	// the member is live again before its next round.
	if forgot || !co.sharedBeat.Load() {
		defer co.heartbeat(ctx)
	}
	rn := co.renewalToSend()
	if len(rn.leases) == 0 {
		co.renewal.succeeded(rn.attempt)
		if forgot {
			co.reseed(ctx)
		}
		return
	}
	renewed, lost, err := co.store.RenewAll(ctx, co.c.owner, rn.leases)
	co.renewedWith(ctx, rn, consumer.Renewal{Renewed: renewed, Lost: lost, Err: err})
}

// leaseRenewal is one renewal of a stream's leases: when it was sent, the
// leases, and their readers by shard.
type leaseRenewal struct {
	attempt time.Time
	leases  []consumer.Lease
	byShard map[string]shardReader
}

// renewalToSend gathers the leases of the readers neither lost nor
// releasing.
func (co *coordinator) renewalToSend() leaseRenewal {
	rn := leaseRenewal{attempt: time.Now(), byShard: map[string]shardReader{}}
	for id, r := range co.readersNow() {
		if r.Lost() || r.Releasing() {
			continue
		}
		rn.leases = append(rn.leases, r.Lease())
		rn.byShard[id] = r
	}
	return rn
}

// renewedWith acts on a renewal's answer: a store that forgot is re-seeded,
// a failure keeps the leases (renewalFailed), renewed leases go to their
// readers and lost ones stop theirs.
func (co *coordinator) renewedWith(ctx context.Context, rn leaseRenewal, res consumer.Renewal) {
	if errors.Is(res.Err, consumer.ErrStoreForgot) {
		if !co.renewal.reseededSince(rn.attempt) {
			co.reseed(ctx)
		}
		return
	}
	if res.Err != nil {
		co.renewalFailed("Renewing leases", rn.byShard, res.Err)
		return
	}
	co.renewal.succeeded(rn.attempt)
	for _, l := range res.Renewed {
		if r := rn.byShard[l.Shard]; r != nil && co.renewal.confirmable(l.Shard) {
			r.LeaseRenewed(l)
		}
	}
	co.stopLost(ctx, rn.byShard, res.Lost)
}

// renewalFailed handles a renewal or re-seed (doing says which) that
// failed: the next attempt retries. The readers keep their leases: those
// whose local deadline passes wait in awaitLease for a renewal that
// confirms the lease, or for one that finds it lost (stopLost).
func (co *coordinator) renewalFailed(doing string, byShard map[string]shardReader, err error) {
	if co.runCtx.Err() != nil {
		return
	}
	waiting := 0
	for _, r := range byShard {
		if !r.LeaseLive() {
			waiting++
		}
	}
	if waiting == 0 {
		co.log.Warnf("%s failed; retrying: %v", doing, err)
		return
	}
	co.log.Errorf("%s failed for %v; %d of %d shard readers are past their lease's local deadline and read nothing until a renewal confirms the lease (retrying): %v",
		doing, time.Since(co.renewal.lastOK()).Round(time.Millisecond), waiting, len(byShard), err)
}

// renewalState is shared by the renew loop and the periodic renewal it
// runs apart.
type renewalState struct {
	mu sync.Mutex
	// ok is when the last renewal or re-seed that succeeded was sent;
	// reseed when the last re-seed that succeeded was.
	ok, reseed time.Time
	// reseeding runs re-seeds one at a time.
	reseeding sync.Mutex
	// unconfirmed holds, per shard, until when a lease this instance
	// re-seeded after its local deadline had passed is kept but not
	// confirmed to its reader (reseed.go).
	unconfirmed map[string]time.Time
}

// holdBack keeps shard's reader waiting until until, though the store
// holds its lease.
func (s *renewalState) holdBack(shard string, until time.Time) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.unconfirmed == nil {
		s.unconfirmed = map[string]time.Time{}
	}
	s.unconfirmed[shard] = until
}

// confirmed drops shard's hold-back.
func (s *renewalState) confirmed(shard string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	delete(s.unconfirmed, shard)
}

// confirmable says whether a renewed lease of shard may be confirmed to
// its reader now.
func (s *renewalState) confirmable(shard string) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	until, held := s.unconfirmed[shard]
	if !held {
		return true
	}
	if time.Now().Before(until) {
		return false
	}
	delete(s.unconfirmed, shard)
	return true
}

func (s *renewalState) succeeded(at time.Time) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.ok = later(s.ok, at)
}

func (s *renewalState) lastOK() time.Time {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.ok
}

func (s *renewalState) reseeded(at time.Time) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.reseed = later(s.reseed, at)
}

// reseededSince reports whether a re-seed sent after at succeeded: a
// renewal sent at at that found the store forgot was answered before it,
// most likely, and needs no re-seed of its own (should the store have
// forgotten again, the next group check says so).
func (s *renewalState) reseededSince(at time.Time) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.reseed.After(at)
}
