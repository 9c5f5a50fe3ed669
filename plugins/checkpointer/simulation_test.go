package checkpointer

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"maps"
	"net"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/alicebob/miniredis/v2"
	"github.com/redis/go-redis/v9"
	"github.com/redis/go-redis/v9/maintnotifications"
	"pgregory.net/rapid"

	"github.com/connect-kinesis/connect-kinesis/internal/consumer"
	"github.com/connect-kinesis/connect-kinesis/internal/consumer/coordinator"
	"github.com/connect-kinesis/connect-kinesis/internal/streams"
	"github.com/connect-kinesis/connect-kinesis/internal/testenv"
)

// The deterministic simulation of the store protocol: several actors, each
// one instance's view of the group, drive the real Store and its real Lua
// scripts through random schedules of takes, renewals, deliveries,
// commits, closes, releases, re-seeds, hand-offs, prunes and discovery
// rounds, composed with faults (FLUSHALL, Redis restarted empty, an actor
// paused past its lease, a script call that timed out after it ran or that
// never ran). A reference model of every shard's records (who delivered
// each, marked or not; which closes were acknowledged) is checked after
// every step. rapid draws the schedule from a seed and shrinks a failing
// one to its shortest action list; the seed replays it exactly.
//
// The store runs on miniredis (in process, its clock set by the
// simulation, so leases expire without waiting) or, at a smaller step
// count, on a real redis-server (TestIntegrationSimulateStoreRedis), whose
// clock is the machine's: there the simulation sleeps to advance time. The
// differences of miniredis that matter here are adapted in simHook: it has
// no INFO server section (Join reads uptime_in_seconds from it), so the
// hook answers it from the simulated server's start; its SCRIPT cache
// survives a restart, so a restart flushes it.

// simKnownDefects lists the known defects the CI slice expects to find
// rather than fail on, each by the invariant's message it breaks; a run
// counts and prints them (known-defect schedules). Remove an entry once its
// fix is merged: the slice then fails on any recurrence.
//
// None is listed now. Fixed, and failures like any other: "re-seed skip"
// (a re-seed after a wipe dropped the shard a newcomer closed or released,
// and the paused holder's position with it), "lost-record skip" (after two
// wipes, a re-seed whose group record lost wrote its later position into a
// shard a paused holder of the kept record had taken from an earlier one;
// TestSimulateStoreLostRecordSkip replays it), "won-back marks" (a holder
// that won its shard back read on with its own take's mark) and "failed
// re-seed marks"
// (the same, when the re-seed's reply was lost: the script ran, the call
// timed out, and the next renewal confirmed the lease; found by the CI
// slice, seed 1796544765447587845). A mark write now returns the mark it
// found stored, and the reader raises its own to it before it hands over.
var simKnownDefects = map[string]bool{}

var (
	simSteps    = flag.Int("sim.steps", 0, "store simulation: average actions per schedule (0: the test's default)")
	simChecks   = flag.Int("sim.schedules", 0, "store simulation: schedules per run (0: the test's default)")
	simDuration = flag.Duration("sim.duration", 0, "store simulation: run batches of schedules for this long (make simulate)")
	simSeed     = flag.Uint64("sim.seed", 0, "store simulation: the seed of the first batch (0: from the clock)")
)

const (
	simPeriod = 10 * time.Second
	simGroup  = "sim"
	simStream = "arn:aws:kinesis:us-east-1:000000000000:stream/sim"
)

// simShards: p1 and p2 are merged into c by a reshard; s0 stays open.
// rapid favours the first, so c, unlisted until the reshard, comes last.
var simShards = []string{"s0", "p1", "p2", "c"}

var simParents = map[string][]string{"c": {"p1", "p2"}}

// simStats counts what every schedule of one run did.
type simStats struct {
	schedules, steps, lateCommits, firstFailAt            atomic.Int64
	flushes, restarts, pauses, ranTimeouts, notRan, wakes atomic.Int64
	excusedUnmarked, knownDefects, markedRedeliveries     atomic.Int64
	staleCommits, staleMarks, staleCloses                 atomic.Int64
}

func (s *simStats) String() string {
	return fmt.Sprintf("script calls=%d schedules=%d steps=%d faults: flushall=%d restart_empty=%d pause=%d timeout_after_run=%d never_ran=%d late_commit=%d stale_commit=%d stale_mark=%d stale_close=%d; marked redeliveries=%d, unmarked redeliveries excused by a wipe=%d; known-defect schedules=%d; first failure at schedule %d",
		simScriptCalls.Load(), s.schedules.Load(), s.steps.Load(), s.flushes.Load(), s.restarts.Load(), s.pauses.Load(), s.ranTimeouts.Load(), s.notRan.Load(),
		s.lateCommits.Load(), s.staleCommits.Load(), s.staleMarks.Load(), s.staleCloses.Load(), s.markedRedeliveries.Load(), s.excusedUnmarked.Load(), s.knownDefects.Load(), s.firstFailAt.Load())
}

// simServer is the Redis the schedules run on, and its clock.
type simServer interface {
	now() time.Time
	advance(d time.Duration)
	// reset empties the server and starts its clock again for a new schedule.
	reset(t *rapid.T)
	flushAll(t *rapid.T)
	restartEmpty(t *rapid.T)
	client(h *simHook) redis.UniversalClient
	admin() redis.UniversalClient
	// hget and sismember read the store's keys for the model's checks:
	// in process where the server is, as a Redis round trip cost a tenth
	// of the simulation's time.
	hget(key, field string) string
	sismember(key, member string) bool
	// info answers INFO server where the server has no such section (nil
	// where it has).
	info() func() string
}

// miniServer is miniredis with a clock the simulation sets.
type miniServer struct {
	m        *miniredis.Miniredis
	clock    time.Time
	started  time.Time
	runID    int
	adminCli redis.UniversalClient
}

func newMiniServer(tb testing.TB) *miniServer {
	m := miniredis.NewMiniRedis()
	if err := m.Start(); err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(m.Close)
	s := &miniServer{m: m}
	s.adminCli = s.client(nil)
	tb.Cleanup(func() { _ = s.adminCli.Close() })
	return s
}

func (s *miniServer) now() time.Time { return s.clock }

func (s *miniServer) advance(d time.Duration) {
	s.clock = s.clock.Add(d)
	s.m.SetTime(s.clock)
}

func (s *miniServer) reset(*rapid.T) {
	s.m.FlushAll()
	s.clock = time.UnixMilli(1_800_000_000_000)
	s.started = s.clock.Add(-time.Hour)
	s.m.SetTime(s.clock)
}

func (s *miniServer) flushAll(*rapid.T) { s.m.FlushAll() }

func (s *miniServer) restartEmpty(t *rapid.T) {
	s.m.FlushAll()
	if err := s.adminCli.ScriptFlush(context.Background()).Err(); err != nil {
		t.Fatalf("flushing the script cache: %v", err)
	}
	s.runID++
	s.started = s.clock
}

// client connects through an in-memory pipe: no port, no TCP stack.
// Maintenance notifications are off: with them on, go-redis resolves the
// address's host name in DNS for every new client, which took nine tenths
// of the simulation's time.
func (s *miniServer) client(h *simHook) redis.UniversalClient {
	c := redis.NewClient(&redis.Options{
		Addr:                     "sim",
		MaintNotificationsConfig: &maintnotifications.Config{Mode: maintnotifications.ModeDisabled},
		Dialer: func(context.Context, string, string) (net.Conn, error) {
			a, b := net.Pipe()
			s.m.Server().ServeConn(b)
			return a, nil
		},
		MaxRetries: -1, DisableIdentity: true, PoolSize: 2,
		ReadTimeout: 5 * time.Second, WriteTimeout: 5 * time.Second,
	})
	if h != nil {
		c.AddHook(h)
	}
	return c
}

func (s *miniServer) admin() redis.UniversalClient { return s.adminCli }

func (s *miniServer) hget(key, field string) string { return s.m.HGet(key, field) }

func (s *miniServer) sismember(key, member string) bool {
	ok, _ := s.m.SIsMember(key, member)
	return ok
}

func (s *miniServer) info() func() string {
	return func() string {
		return fmt.Sprintf("# Server\r\nrun_id:sim%038d\r\nuptime_in_seconds:%d\r\n", s.runID, int64(s.clock.Sub(s.started)/time.Second))
	}
}

// realServer is a redis-server: its clock is the machine's.
type realServer struct {
	r        *testenv.Redis
	adminCli *redis.Client
}

func (s *realServer) now() time.Time          { return time.Now() }
func (s *realServer) advance(d time.Duration) { time.Sleep(d) }
func (s *realServer) reset(t *rapid.T)        { s.flushAll(t) }

func (s *realServer) flushAll(t *rapid.T) {
	if err := s.adminCli.FlushAll(context.Background()).Err(); err != nil {
		t.Fatalf("FLUSHALL: %v", err)
	}
}

func (s *realServer) restartEmpty(t *rapid.T) {
	if err := s.r.Restart(context.Background()); err != nil {
		t.Fatalf("restarting redis-server: %v", err)
	}
}

func (s *realServer) client(h *simHook) redis.UniversalClient {
	o, err := redis.ParseURL(s.r.URL())
	if err != nil {
		panic(err)
	}
	o.MaxRetries, o.DisableIdentity, o.PoolSize = -1, true, 2
	c := redis.NewClient(o)
	if h != nil {
		c.AddHook(h)
	}
	return c
}

func (s *realServer) admin() redis.UniversalClient { return s.adminCli }

func (s *realServer) hget(key, field string) string {
	v, _ := s.adminCli.HGet(simCtx, key, field).Result()
	return v
}

func (s *realServer) sismember(key, member string) bool {
	ok, _ := s.adminCli.SIsMember(simCtx, key, member).Result()
	return ok
}
func (s *realServer) info() func() string { return nil }

// Fault modes of one actor's next script call.
const (
	faultNone = iota
	faultRanThenTimeout
	faultNeverRan
)

// simScriptCalls counts the script calls of every actor.
var simScriptCalls atomic.Int64

var errSimTimeout = &net.OpError{Op: "read", Net: "tcp", Err: os.ErrDeadlineExceeded}

// simHook is an actor's go-redis hook: it makes the next script call time
// out after it ran, or without running, and answers INFO server for a
// server that lacks it.
type simHook struct {
	armed int
	// ran tells the model whether the last faulted call ran.
	ran      bool
	infoFunc func() string
}

func (h *simHook) DialHook(next redis.DialHook) redis.DialHook { return next }
func (h *simHook) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return next
}

func (h *simHook) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		name := cmd.Name()
		if name == "info" && h.infoFunc != nil {
			if sc, ok := cmd.(*redis.StringCmd); ok {
				sc.SetVal(h.infoFunc())
				return nil
			}
		}
		if name == "evalsha" || name == "eval" {
			simScriptCalls.Add(1)
		}
		if (name == "evalsha" || name == "eval") && h.armed != faultNone {
			mode := h.armed
			if mode == faultNeverRan {
				h.armed, h.ran = faultNone, false
				cmd.SetErr(errSimTimeout)
				return errSimTimeout
			}
			err := next(ctx, cmd)
			if err != nil && strings.HasPrefix(err.Error(), "NOSCRIPT") {
				return err // Script.Run sends EVAL next: the fault waits for it.
			}
			h.armed, h.ran = faultNone, true
			cmd.SetErr(errSimTimeout)
			return errSimTimeout
		}
		return next(ctx, cmd)
	}
}

// simRecord is one record of a shard in the reference model.
type simRecord struct {
	written time.Time
	// deliveries: by whom, and whether each carried the redelivery mark.
	deliveries []simDelivery
}

type simDelivery struct {
	actor  string
	marked bool
	at     int // the wipe count when delivered
}

// simHeld is an actor's reader of one shard.
type simHeld struct {
	lease consumer.Lease
	// pos is how far it delivered (every delivery is acked at once), as
	// the 1-based index of the last record; committed how far it
	// committed.
	pos, committed int
	// mark: records at or below it are delivered marked (the take's
	// redelivery mark).
	mark int
	// waitUntil: a lease renewed by a re-seed after it lapsed is read on
	// only after a lease period (the coordinator's hold-back).
	waitUntil time.Time
	// wonBack: a re-seed won the lease back from another owner.
	wonBack bool
	// reseedFailed: the holder's last re-seed returned an error (its reply
	// may be lost although the script ran), so its mark was not raised.
	reseedFailed bool
}

// simActor is one instance.
type simActor struct {
	name      string
	hook      *simHook
	client    redis.UniversalClient
	cp        *Checkpointer
	store     *Store
	joined    bool
	notBefore time.Time
	paused    bool
	held      map[string]*simHeld
	// committed and closed are what the instance knows, for its seed.
	committed map[string]int
	closed    map[string]bool
	forgot    bool
	claim     DiscoveryClaim
	// late is a commit sent that the network holds: the actor saw it time
	// out; it lands when the fault lets it (fault_late_commit).
	late *simLate
	// past are leases the actor held and gave up or lost, with how far it
	// had delivered: a commit, mark or close loop that has not heard yet
	// may still present one (stale).
	past []simLate
}

type simLate struct {
	lease consumer.Lease
	pos   int
}

// simModel is one schedule's state.
type simModel struct {
	srv    simServer
	stats  *simStats
	latest bool // start_position: latest (else trim_horizon)
	actors []*simActor
	// records per shard; ended: no more writes (p1, p2 after the reshard).
	records   map[string][]*simRecord
	ended     map[string]bool
	resharded bool
	// closedAck: a close of the shard the store acknowledged (or ran).
	closedAck map[string]bool
	// owedFrom: per shard, the first record index the group must deliver.
	owedFrom map[string]int
	// firstStart: the group's start as the first take saw it.
	firstStart time.Time
	wipes      int
	// pending: actors that held a shard at the last wipe and have not
	// re-seeded since; until they have, a checkpoint past records they
	// alone delivered is not yet a skip (they win the shard back).
	pending map[string]map[string]bool
	// orphaned: shards nobody held at a wipe; their next take starts the
	// obligation again (the store's start position rule).
	orphaned map[string]bool
	log      []string
	// lastCkpt is each shard's checkpoint index at the last check (the
	// record count+1 for SHARD_END); reseeded tells the check a re-seed ran
	// since, which may move a checkpoint back (the tie rule: a re-read).
	lastCkpt map[string]int
	reseeded bool
	// doneAtReseed: shards a re-seed took for done.
	doneAtReseed map[string]bool
}

func (m *simModel) logf(format string, args ...any) {
	m.log = append(m.log, fmt.Sprintf("%6.1fs ", m.srv.now().Sub(time.UnixMilli(1_800_000_000_000)).Seconds())+fmt.Sprintf(format, args...))
}

var simCtx = context.Background()

func newSimModel(t *rapid.T, srv simServer, stats *simStats, nActors int) *simModel {
	srv.reset(t)
	m := &simModel{
		srv: srv, stats: stats,
		latest:       rapid.Bool().Draw(t, "latest"),
		records:      map[string][]*simRecord{},
		ended:        map[string]bool{},
		closedAck:    map[string]bool{},
		owedFrom:     map[string]int{},
		pending:      map[string]map[string]bool{},
		orphaned:     map[string]bool{},
		lastCkpt:     map[string]int{},
		doneAtReseed: map[string]bool{},
	}
	// Records written before the group started: `latest` never reads them.
	for _, s := range []string{"p1", "p2", "s0"} {
		m.records[s] = []*simRecord{{written: srv.now().Add(-time.Minute)}, {written: srv.now().Add(-time.Minute)}}
	}
	for i := range nActors {
		h := &simHook{infoFunc: srv.info()}
		cfg := DefaultConfig()
		cfg.RedisURL, cfg.Group, cfg.LeasePeriod = "redis://sim", simGroup, simPeriod
		if _, real := srv.(*realServer); real {
			cfg.LeasePeriod = simRealPeriod
		}
		cl := srv.client(h)
		cp := NewFromClient(cl, cfg, nil, nil)
		a := &simActor{name: fmt.Sprintf("i%d", i), hook: h, client: cl, cp: cp, store: cp.Stream(simStream),
			held: map[string]*simHeld{}, committed: map[string]int{}, closed: map[string]bool{}}
		m.actors = append(m.actors, a)
	}
	t.Cleanup(func() {
		for _, a := range m.actors {
			_ = a.client.Close()
		}
	})
	return m
}

func (m *simModel) actor(name string) *simActor {
	for _, a := range m.actors {
		if a.name == name {
			return a
		}
	}
	return nil
}

func (m *simModel) period() time.Duration { return m.actors[0].cp.cfg.LeasePeriod }

func (m *simModel) listed(shard string) bool { return shard != "c" || m.resharded }

// fail reports an invariant broken. A known defect (simKnownDefects) ends
// the schedule as passed when the run tolerates it, and is counted.
func (m *simModel) fail(t *rapid.T, kind, format string, args ...any) {
	msg := fmt.Sprintf(kind+": "+format, args...)
	if simKnownDefects[kind] && !*simStrict && kind != *simFind {
		panic(simKnown(msg))
	}
	m.stats.firstFailAt.CompareAndSwap(0, m.stats.schedules.Load())
	t.Logf("schedule (store clock, action):\n  %s", strings.Join(m.log, "\n  "))
	t.Fatal(msg)
}

// simKnown ends a schedule that found a known defect: runSimulation counts
// it and passes the schedule.
type simKnown string

// simFind fails on one known defect, by its kind, and tolerates the others:
// to find and shrink that one.
var simFind = flag.String("sim.find", "", "store simulation: fail on this known defect (a key of simKnownDefects) only")

// simStrict fails on known defects too (`make simulate`).
var simStrict = flag.Bool("sim.strict", false, "store simulation: fail on the known defects too")

// pick draws an actor that is not paused, or nil.
func (m *simModel) pick(t *rapid.T) *simActor {
	a := m.actors[rapid.IntRange(0, len(m.actors)-1).Draw(t, "actor")]
	if a.paused {
		return nil
	}
	return a
}

// pickHeld draws an actor that is not paused and one of the shards it
// holds, or nil.
func (m *simModel) pickHeld(t *rapid.T) (*simActor, string) {
	a := m.pick(t)
	if a == nil || len(a.held) == 0 {
		return nil, ""
	}
	return a, rapid.SampledFrom(slices.Sorted(maps.Keys(a.held))).Draw(t, "held shard")
}

// drop forgets a held shard; its lease stays among the past ones, which a
// stale call may still present. As the coordinator's known.gaveUp, a
// shard whose reader ends keeps no position for a later seed.
func (a *simActor) drop(shard string) {
	if h := a.held[shard]; h != nil {
		a.past = append(a.past, simLate{lease: h.lease, pos: h.pos})
	}
	delete(a.held, shard)
	delete(a.committed, shard)
}

// seen notes a FORGOT answer; the consumer re-seeds on it.
func (a *simActor) seen(err error) error {
	if errors.Is(err, consumer.ErrStoreForgot) {
		a.forgot = true
	}
	return err
}

// rawLease reads a shard's lease value from the store.
func (m *simModel) rawLease(shard string) string {
	return m.srv.hget(m.actors[0].store.keys.Leases, shard)
}

func (m *simModel) rawCkpt(shard string) string {
	return m.srv.hget(m.actors[0].store.keys.Checkpoints, shard)
}

func (m *simModel) rawMark(shard string) string {
	return m.srv.hget(m.actors[0].store.keys.Delivered, shard)
}

func (m *simModel) rawClosed(shard string) bool {
	return m.srv.sismember(m.actors[0].store.keys.Closed, shard)
}

func seqOf(i int) consumer.Position { return consumer.Position{Sequence: strconv.Itoa(i)} }

// startIndex is the index of the last record before where a take without a
// checkpoint starts reading.
func (m *simModel) startIndex(shard string, take consumer.Take) int {
	if !take.Checkpoint.IsZero() {
		if take.Checkpoint.ShardEnd {
			return len(m.records[shard])
		}
		n, _ := strconv.Atoi(take.Checkpoint.Sequence)
		return n
	}
	if !m.latest {
		return 0
	}
	from := take.GroupStart.Add(-consumer.LatestSkewMargin)
	n := 0
	for i, r := range m.records[shard] {
		if r.written.Before(from) {
			n = i + 1
		}
	}
	return n
}

// Action: Join. The instance joins the group and waits as Join says.
func (m *simModel) join(t *rapid.T) {
	a := m.pick(t)
	if a == nil || a.joined {
		return
	}
	m.joinActor(a)
}

func (m *simModel) joinActor(a *simActor) {
	wait, err := a.store.Join(simCtx)
	m.logf("%s join: wait %v err %v", a.name, wait, err)
	if err == nil {
		a.joined, a.notBefore = true, m.srv.now().Add(wait)
	}
}

// ready is the coordinator's gate (coordinator.ReadyShards), on the closed
// set the actor read and the shards listed now.
func (m *simModel) ready(shard string, closed map[string]bool) bool {
	listed := map[string]consumer.Shard{}
	for _, s := range simShards {
		if m.listed(s) {
			sh := consumer.Shard{ID: s, Closed: m.ended[s]}
			if ps := simParents[s]; len(ps) == 2 {
				sh.Parent, sh.Adjacent = ps[0], ps[1]
			}
			listed[s] = sh
		}
	}
	_, ok := slices.BinarySearch(coordinator.ReadyShards(listed, closed), shard)
	return ok
}

// Action: take one shard the gate allows, or several in one call
// (AcquireMany, the balancing round's batched take).
func (m *simModel) take(t *rapid.T) {
	a := m.pick(t)
	shards := rapid.SliceOfNDistinct(rapid.SampledFrom(simShards), 1, 3, rapid.ID[string]).Draw(t, "shards")
	if a == nil {
		return
	}
	m.takeShards(t, a, shards)
}

func (m *simModel) takeShard(t *rapid.T, a *simActor, shard string) {
	m.takeShards(t, a, []string{shard})
}

// takeShards takes the shards the gate allows and a does not hold: one
// alone as Acquire does, several in one AcquireMany call.
func (m *simModel) takeShards(t *rapid.T, a *simActor, shards []string) {
	if !a.joined || m.srv.now().Before(a.notBefore) {
		return
	}
	closed, err := a.store.ClosedShards(simCtx)
	if a.seen(err) != nil {
		m.logf("%s closed shards: %v", a.name, err)
		return
	}
	for s := range closed {
		a.closed[s] = true
	}
	var want []string
	for _, shard := range shards {
		if a.held[shard] == nil && m.ready(shard, closed) {
			want = append(want, shard)
		}
	}
	before := map[string]string{}
	for _, shard := range want {
		before[shard] = m.rawLease(shard)
	}
	switch len(want) {
	case 0:
	case 1:
		take, err := a.store.AcquireMarked(simCtx, want[0], a.name)
		m.checkNotLive(t, a, want[0], before[want[0]], err)
		m.tookShard(t, a, want[0], take, err)
	default:
		for i, r := range a.store.AcquireMany(simCtx, want, a.name) {
			m.checkNotLive(t, a, want[i], before[want[i]], r.Err)
			m.tookShard(t, a, want[i], MarkedTake{Take: r.Take, Delivered: r.Take.Delivered}, r.Err)
		}
	}
}

// checkNotLive fails a take that succeeded over a lease live at the time
// (the lease rule: a live lease is never taken, not even under the
// taker's own id), raw being the shard's lease before the call.
func (m *simModel) checkNotLive(t *rapid.T, a *simActor, shard, raw string, err error) {
	if err != nil || raw == "" {
		return
	}
	if owner, exp, tok, ok := ParseLeaseValue(raw); ok && owner != "" && exp > m.srv.now().UnixMilli() {
		m.fail(t, "lease", "%s took %s while %s's lease (token %d) was live until %d", a.name, shard, owner, tok, exp)
	}
}

// tookShard models the answer of a take of shard and checks the gate.
func (m *simModel) tookShard(t *rapid.T, a *simActor, shard string, take MarkedTake, err error) {
	if a.seen(err) != nil {
		m.logf("%s take %s: %v", a.name, shard, err)
		if errors.Is(err, errSimTimeout) && a.hook.ran {
			// The take ran: the store names this actor, which does not
			// know it; its lease lapses. Nothing to model.
		}
		return
	}
	for _, p := range simParents[shard] {
		if !m.closedAck[p] {
			m.fail(t, "gate", "%s took %s (token %d) while its parent %s had no acknowledged close", a.name, shard, take.Token, p)
		}
	}
	if m.firstStart.IsZero() {
		m.firstStart = take.GroupStart
	}
	start := m.startIndex(shard, take.Take)
	if m.orphaned[shard] {
		delete(m.orphaned, shard)
		m.owedFrom[shard] = start + 1
	}
	mark := 0
	if !take.Delivered.IsZero() {
		mark, _ = strconv.Atoi(take.Delivered.Sequence)
		if take.Delivered.ShardEnd {
			mark = len(m.records[shard])
		}
	}
	a.held[shard] = &simHeld{lease: take.Lease, pos: start, committed: start, mark: mark}
	m.logf("%s took %s token %d checkpoint %q start %d mark %d", a.name, shard, take.Token, take.Checkpoint.String(), start, mark)
}

// Action: one round of an instance, as its coordinator runs it: re-seed
// when the store forgot, renew, take one ready free shard, then per held
// shard deliver a few records, commit and close it at its end.
func (m *simModel) round(t *rapid.T) {
	a := m.pick(t)
	shard := rapid.SampledFrom(simShards).Draw(t, "shard to take")
	n := rapid.IntRange(0, 3).Draw(t, "records")
	commit := rapid.Bool().Draw(t, "commit")
	if a == nil {
		return
	}
	if !a.joined {
		m.joinActor(a)
		return
	}
	m.reseedActor(t, a)
	m.renewActor(a)
	m.takeShard(t, a, shard)
	for _, s := range simShards {
		if a.held[s] == nil {
			continue
		}
		m.deliverShard(t, a, s, n)
		if commit {
			m.commitShard(t, a, s)
		}
		m.closeHeld(t, a, s)
	}
}

// Action: renew every lease the actor holds.
func (m *simModel) renew(t *rapid.T) {
	a := m.pick(t)
	if a == nil || len(a.held) == 0 {
		return
	}
	m.renewActor(a)
}

func (m *simModel) renewActor(a *simActor) {
	var ls []consumer.Lease
	for _, s := range slices.Sorted(maps.Keys(a.held)) {
		ls = append(ls, a.held[s].lease)
	}
	if len(ls) == 0 {
		return
	}
	renewed, lost, err := a.store.RenewAll(simCtx, a.name, ls)
	if a.seen(err) != nil {
		m.logf("%s renew: %v", a.name, err)
		if a.forgot {
			// As the coordinator does (coordinator/leases.go renewedWith):
			// a renewal the store answers FORGOT is followed by a re-seed
			// at once, not at the next round, so that a holder that wakes
			// within the re-seed hold claims its shards back within it.
			m.reseedActor(nil, a)
		}
		return
	}
	for _, l := range renewed {
		a.held[l.Shard].lease = l
	}
	for _, s := range lost {
		a.drop(s)
	}
	m.logf("%s renewed %d, lost %v", a.name, len(renewed), lost)
}

// Action: deliver up to n records of a held shard, writing the redelivery
// mark first as the reader does.
func (m *simModel) deliver(t *rapid.T) {
	a, shard := m.pickHeld(t)
	n := rapid.IntRange(1, 4).Draw(t, "records")
	if a == nil {
		return
	}
	m.deliverShard(t, a, shard, n)
}

func (m *simModel) deliverShard(t *rapid.T, a *simActor, shard string, n int) {
	h := a.held[shard]
	if h == nil || !h.lease.ExpiresAt.After(m.srv.now()) || m.srv.now().Before(h.waitUntil) {
		return
	}
	to := min(h.pos+n, len(m.records[shard]))
	if to <= h.pos {
		return
	}
	before, markBefore := m.rawLease(shard), m.rawMark(shard)
	w, err := a.store.WriteDeliveredFound(simCtx, a.name, []DeliveredMark{{Shard: shard, Token: h.lease.Token, Position: seqOf(to)}})
	if mark := m.rawMark(shard); !holds(before, a.name, h.lease.Token) && mark != markBefore && mark == strconv.Itoa(to) {
		m.fail(t, "fencing", "%s's mark %d of %s landed while the lease read %q (its token %d)", a.name, to, shard, before, h.lease.Token)
	}
	if a.seen(err) != nil || len(w.Fenced) > 0 {
		m.logf("%s mark %s %d: fenced %v err %v", a.name, shard, to, w.Fenced, err)
		if len(w.Fenced) > 0 {
			a.drop(shard)
		}
		return
	}
	// As the reader raises its mark to the one the write found stored
	// (Marker.Found) before it hands anything over.
	if f, ok := w.Found[shard]; ok {
		h.mark = max(h.mark, m.markIndex(shard, f))
	}
	for i := h.pos + 1; i <= to; i++ {
		r := m.records[shard][i-1]
		marked := i <= h.mark
		if len(r.deliveries) > 0 && !marked {
			last := r.deliveries[len(r.deliveries)-1]
			if last.at == m.wipes {
				kind := "marks"
				switch {
				case h.reseedFailed:
					kind = "failed re-seed marks"
				case h.wonBack:
					kind = "won-back marks"
				}
				m.fail(t, kind, "%s delivered %s record %d unmarked; %s had delivered it before (take mark %d)", a.name, shard, i, last.actor, h.mark)
			}
			m.stats.excusedUnmarked.Add(1)
		} else if len(r.deliveries) > 0 {
			m.stats.markedRedeliveries.Add(1)
		}
		r.deliveries = append(r.deliveries, simDelivery{actor: a.name, marked: marked, at: m.wipes})
	}
	m.logf("%s delivered %s %d..%d (marked up to %d)", a.name, shard, h.pos+1, to, h.mark)
	h.pos = to
}

// markIndex is a redelivery mark as the 1-based index of the last record
// it covers.
func (m *simModel) markIndex(shard string, p consumer.Position) int {
	if p.ShardEnd {
		return len(m.records[shard])
	}
	i, _ := strconv.Atoi(p.Sequence)
	return i
}

// holds reports whether a raw lease value names owner under token.
func holds(raw, owner string, token int64) bool {
	o, _, tok, ok := ParseLeaseValue(raw)
	return ok && o == owner && tok == token
}

// Action: commit how far a held shard was delivered.
func (m *simModel) commit(t *rapid.T) {
	a, shard := m.pickHeld(t)
	if a == nil {
		return
	}
	m.commitShard(t, a, shard)
}

func (m *simModel) commitShard(t *rapid.T, a *simActor, shard string) {
	h := a.held[shard]
	if h == nil || h.pos <= h.committed || h.pos == 0 {
		return
	}
	before, ckBefore := m.rawLease(shard), m.rawCkpt(shard)
	err := a.store.Commit(simCtx, h.lease, seqOf(h.pos))
	if ck := m.rawCkpt(shard); !holds(before, a.name, h.lease.Token) && ck != ckBefore && ck == strconv.Itoa(h.pos) {
		m.fail(t, "fencing", "%s's commit %d of %s landed while the lease read %q (its token %d)", a.name, h.pos, shard, before, h.lease.Token)
	}
	m.logf("%s commit %s %d: %v", a.name, shard, h.pos, err)
	switch {
	case err == nil:
		h.committed = h.pos
		a.committed[shard] = h.pos
	case errors.Is(err, consumer.ErrLeaseLost):
		a.drop(shard)
	default:
		a.seen(err)
	}
}

// Action: close a shard read to its end.
func (m *simModel) closeShard(t *rapid.T) {
	a, shard := m.pickHeld(t)
	if a == nil {
		return
	}
	m.closeHeld(t, a, shard)
}

func (m *simModel) closeHeld(t *rapid.T, a *simActor, shard string) {
	h := a.held[shard]
	if h == nil || !m.ended[shard] || h.pos < len(m.records[shard]) {
		return
	}
	before, was := m.rawLease(shard), m.rawClosed(shard)
	err := a.store.CloseShard(simCtx, h.lease)
	now := m.rawClosed(shard)
	if !was && now && !holds(before, a.name, h.lease.Token) {
		m.fail(t, "fencing", "%s's close of %s landed while the lease read %q (its token %d)", a.name, shard, before, h.lease.Token)
	}
	m.logf("%s close %s: %v", a.name, shard, err)
	if err == nil || (errors.Is(err, errSimTimeout) && a.hook.ran && now) {
		m.closedAck[shard] = true
	}
	switch {
	case err == nil:
		a.closed[shard] = true
		a.drop(shard)
		delete(a.committed, shard)
	case errors.Is(err, consumer.ErrLeaseLost):
		a.drop(shard)
	default:
		a.seen(err)
	}
}

// Action: release a held shard after committing it (a stop, a hand-off).
func (m *simModel) release(t *rapid.T) {
	a, shard := m.pickHeld(t)
	if a == nil {
		return
	}
	m.releaseShard(t, a, shard)
}

func (m *simModel) releaseShard(t *rapid.T, a *simActor, shard string) {
	h := a.held[shard]
	if h == nil {
		return
	}
	m.commitShard(t, a, shard)
	if h.pos > h.committed {
		return // the final commit failed: the lease lapses instead
	}
	err := a.store.Release(simCtx, h.lease)
	m.logf("%s release %s: %v", a.name, shard, a.seen(err))
	if err == nil || errors.Is(err, consumer.ErrLeaseLost) {
		a.drop(shard)
	}
}

// Action: check the group record and re-seed when the store forgot it.
func (m *simModel) reseed(t *rapid.T) {
	a := m.pick(t)
	if a == nil {
		return
	}
	m.reseedActor(t, a)
}

func (m *simModel) reseedActor(_ *rapid.T, a *simActor) {
	if a.store.knownEpoch() == "" {
		return
	}
	if !a.forgot {
		if a.seen(a.store.CheckGroup(simCtx)) == nil {
			return
		}
	}
	// The seed as the coordinator builds it (coordinator/reseed.go).
	seed := consumer.Seed{Owner: a.name, Checkpoints: map[string]consumer.Position{}, Closed: slices.Sorted(maps.Keys(a.closed))}
	for s, p := range a.committed {
		if p > 0 {
			seed.Checkpoints[s] = seqOf(p)
		}
	}
	for _, s := range slices.Sorted(maps.Keys(a.held)) {
		h := a.held[s]
		if h.pos > 0 {
			seed.Checkpoints[s] = seqOf(h.pos)
		}
		seed.Leases = append(seed.Leases, h.lease)
	}
	// A shard the actor still reads is not seeded closed, as the
	// coordinator drops it: a close learned from the store may be a
	// newcomer's, which the re-seed takes back.
	seed.Closed = slices.DeleteFunc(seed.Closed, func(s string) bool { return a.held[s] != nil })
	for s := range seed.Checkpoints {
		if a.held[s] == nil && a.closed[s] {
			delete(seed.Checkpoints, s)
		}
	}
	others, newer := map[string]bool{}, map[string]bool{}
	for _, l := range seed.Leases {
		o, _, tok, ok := ParseLeaseValue(m.rawLease(l.Shard))
		if ok && o != "" && o != a.name {
			others[l.Shard] = true
		}
		newer[l.Shard] = ok && tok > l.Token
	}
	res, err := a.store.Reseed(simCtx, seed)
	m.reseeded = true
	m.logf("%s re-seed (%d checkpoints %v, closed %v, %d leases): renewed %d lost %v err %v", a.name, len(seed.Checkpoints), seed.Checkpoints, seed.Closed, len(seed.Leases), len(res.Renewed), res.Lost, err)
	if err != nil {
		for _, h := range a.held {
			h.reseedFailed = true
		}
		return
	}
	for _, h := range a.held {
		h.reseedFailed = false
	}
	a.forgot = false
	delete(m.pending, a.name)
	for _, l := range res.Renewed {
		h := a.held[l.Shard]
		// Won back from another owner (the tie rule, or an older token's):
		// that owner may have delivered records this reader reads next.
		h.wonBack = h.wonBack || others[l.Shard]
		if h.lease.ExpiresAt.Before(m.srv.now()) {
			h.waitUntil = m.srv.now().Add(m.period())
		}
		h.lease = l
		// As the coordinator raises its reader's mark (Reader.RaiseDelivered):
		// what another owner delivered while this one was away is marked
		// when it is read again.
		if d, ok := res.Delivered[l.Shard]; ok {
			h.mark = max(h.mark, m.markIndex(l.Shard, d))
		}
	}
	for _, s := range res.Lost {
		a.drop(s)
		// As the coordinator's known.newerOwner: the shard's position is
		// its new holder's, never this actor's to re-seed.
		delete(a.committed, s)
	}
	// A seeded lease neither renewed nor lost is one the script took for
	// done (closed, or released under its token): the case of issue 59
	// item 2 when another instance closed or released it after a wipe. A
	// lease lost to a newer token than the holder's, taken after the wipe,
	// is the same loss by another path.
	renewed := map[string]bool{}
	for _, l := range res.Renewed {
		renewed[l.Shard] = true
	}
	for _, l := range seed.Leases {
		lost := slices.Contains(res.Lost, l.Shard)
		if (!renewed[l.Shard] && !lost) || (lost && newer[l.Shard]) {
			m.doneAtReseed[l.Shard] = true
		}
		if !renewed[l.Shard] && !lost {
			// Done: its reader finishes and gives the lease up, as the
			// coordinator's does, rather than renewing it for ever.
			a.drop(l.Shard)
		}
	}
	if res.RecordLost {
		// As the coordinator does (coordinator/reseed.go): the closes an
		// instance whose record lost knew came from the emptied store, and
		// those the kept record's holders did not settle are in the store
		// now. A seed that kept them would write back, after a later wipe,
		// a newcomer's close over a shard a holder won back from it.
		clear(a.closed)
		// And the positions of shards it no longer reads (the
		// coordinator's known.committed, reseed.go).
		for s := range a.committed {
			if a.held[s] == nil {
				delete(a.committed, s)
			}
		}
	}
}

// Action: ask the owner of a shard to hand it over.
func (m *simModel) requestHandoff(t *rapid.T) {
	a := m.pick(t)
	shard := rapid.SampledFrom(simShards).Draw(t, "shard")
	if a == nil || !a.joined {
		return
	}
	_ = a.store.Heartbeat(simCtx, a.name)
	err := a.store.RequestHandoff(simCtx, shard, a.name)
	m.logf("%s asks for %s: %v", a.name, shard, err)
}

// Action: heartbeat and answer hand-off requests: commit and release.
func (m *simModel) answerHandoffs(t *rapid.T) {
	a := m.pick(t)
	if a == nil || !a.joined {
		return
	}
	_ = a.store.Heartbeat(simCtx, a.name)
	reqs, err := a.store.HandoffRequests(simCtx, a.name)
	if err != nil {
		return
	}
	for _, s := range slices.Sorted(maps.Keys(reqs)) {
		m.logf("%s hands %s to %s", a.name, s, reqs[s])
		m.releaseShard(t, a, s)
	}
}

// Action: prune the entries of shards the stream no longer lists. Every
// shard of the simulation stays listed, so a prune names a shard that was
// never listed, and must leave every listed shard's entries alone.
func (m *simModel) prune(t *rapid.T) {
	a := m.pick(t)
	if a == nil || !a.joined {
		return
	}
	pruned, err := a.store.Prune(simCtx, []string{"gone"})
	m.logf("%s prune gone: %v %v", a.name, pruned, a.seen(err))
}

// Action: claim the discovery lease and publish a listing under it; only
// the holder's publish may land.
func (m *simModel) discovery(t *rapid.T) {
	a := m.pick(t)
	publish := rapid.Bool().Draw(t, "publish")
	if a == nil {
		return
	}
	if !publish {
		c, err := a.cp.ClaimDiscovery(simCtx, a.name, m.period())
		if err == nil && c.Granted {
			a.claim = c
		}
		m.logf("%s claims discovery: granted %v token %d err %v", a.name, c.Granted, c.Token, err)
		return
	}
	if a.claim.Token == 0 {
		return
	}
	before, _ := m.srv.admin().HGet(simCtx, a.cp.DiscoveryKey(), "_lease").Result()
	ok, _, err := a.cp.PublishDiscovery(simCtx, a.name, a.claim.Token, []streams.Identity{{Name: "sim", ARN: simStream, Created: time.UnixMilli(1)}}, time.Hour)
	m.logf("%s publishes discovery under token %d: %v %v", a.name, a.claim.Token, ok, err)
	if ok && !holds(before, a.name, a.claim.Token) {
		m.fail(t, "fencing", "%s published the discovery listing under token %d while the lease read %q", a.name, a.claim.Token, before)
	}
}

// Action: write a record to a shard that takes writes.
func (m *simModel) produce(t *rapid.T) {
	shard := rapid.SampledFrom(simShards).Draw(t, "shard")
	if !m.listed(shard) || m.ended[shard] {
		return
	}
	m.records[shard] = append(m.records[shard], &simRecord{written: m.srv.now()})
	m.logf("write %s record %d", shard, len(m.records[shard]))
}

// Action: merge p1 and p2 into c.
func (m *simModel) reshard(*rapid.T) {
	if m.resharded {
		return
	}
	m.resharded, m.ended["p1"], m.ended["p2"] = true, true, true
	m.logf("reshard: p1, p2 end (%d, %d records); c listed", len(m.records["p1"]), len(m.records["p2"]))
}

// Action: let time pass.
func (m *simModel) advance(t *rapid.T) {
	d := time.Duration(rapid.IntRange(1, 30).Draw(t, "tenths of a period")) * m.period() / 10
	m.srv.advance(d)
	// The streams take writes all along: one record per open shard.
	for _, s := range simShards {
		if m.listed(s) && !m.ended[s] {
			m.records[s] = append(m.records[s], &simRecord{written: m.srv.now()})
		}
	}
	m.logf("advance %v; a record written to each open shard", d)
}

// Fault: an actor pauses (a GC stop, a frozen VM) or wakes.
func (m *simModel) pause(t *rapid.T) {
	a := m.actors[rapid.IntRange(0, len(m.actors)-1).Draw(t, "actor")]
	a.paused = !a.paused
	if a.paused {
		m.stats.pauses.Add(1)
	} else {
		m.stats.wakes.Add(1)
	}
	m.logf("%s paused=%v", a.name, a.paused)
}

// Fault: the next script call of an actor times out after it ran, or
// without running.
func (m *simModel) timeout(t *rapid.T) {
	a := m.actors[rapid.IntRange(0, len(m.actors)-1).Draw(t, "actor")]
	ran := rapid.Bool().Draw(t, "ran")
	if ran {
		a.hook.armed = faultRanThenTimeout
		m.stats.ranTimeouts.Add(1)
	} else {
		a.hook.armed = faultNeverRan
		m.stats.notRan.Add(1)
	}
	m.logf("%s's next script call times out (ran: %v)", a.name, ran)
}

// noteWipe records who held each shard when the store forgot.
func (m *simModel) noteWipe() {
	for _, s := range simShards {
		raw := m.rawLease(s)
		holder := ""
		for _, a := range m.actors {
			if h := a.held[s]; h != nil && holds(raw, a.name, h.lease.Token) {
				holder = a.name
			}
		}
		if holder == "" {
			m.orphaned[s] = true
			continue
		}
		if m.pending[holder] == nil {
			m.pending[holder] = map[string]bool{}
		}
		m.pending[holder][s] = true
	}
	m.wipes++
}

// Fault: a commit held by the network. The first time, an actor's commit
// of a held shard is sent and its reply times out; the next time, that
// commit lands, after whatever the actor did since.
func (m *simModel) lateCommit(t *rapid.T) {
	a := m.actors[rapid.IntRange(0, len(m.actors)-1).Draw(t, "actor")]
	shard := rapid.SampledFrom(simShards).Draw(t, "shard")
	if l := a.late; l != nil {
		a.late = nil
		before, ckBefore := m.rawLease(l.lease.Shard), m.rawCkpt(l.lease.Shard)
		err := a.store.Commit(simCtx, l.lease, seqOf(l.pos))
		if ck := m.rawCkpt(l.lease.Shard); !holds(before, a.name, l.lease.Token) && ck != ckBefore && ck == strconv.Itoa(l.pos) {
			m.fail(t, "fencing", "%s's late commit %d of %s landed while the lease read %q (its token %d)", a.name, l.pos, l.lease.Shard, before, l.lease.Token)
		}
		m.logf("%s's commit %s %d, held by the network, lands: %v", a.name, l.lease.Shard, l.pos, err)
		return
	}
	if len(a.held) == 0 {
		return
	}
	shard = slices.Sorted(maps.Keys(a.held))[rapid.IntRange(0, len(a.held)-1).Draw(t, "held shard")]
	h := a.held[shard]
	if h.pos == 0 {
		return
	}
	a.late = &simLate{lease: h.lease, pos: h.pos}
	m.stats.lateCommits.Add(1)
	m.logf("%s's commit %s %d is held by the network (the actor saw a timeout)", a.name, shard, h.pos)
}

// Fault: a call with a lease the actor no longer holds (its commit, mark
// or close loop had not heard of the loss yet): fenced, it must change
// nothing.
func (m *simModel) staleCall(t *rapid.T) {
	a := m.actors[rapid.IntRange(0, len(m.actors)-1).Draw(t, "actor")]
	what := rapid.IntRange(0, 2).Draw(t, "commit, mark or close")
	if len(a.past) == 0 {
		return
	}
	l := a.past[rapid.IntRange(0, len(a.past)-1).Draw(t, "past lease")]
	if a.held[l.lease.Shard] != nil && a.held[l.lease.Shard].lease.Token == l.lease.Token {
		return // still held: not stale
	}
	m.staleOn(t, a, l, what)
}

// staleOn sends a commit (0), mark (1) or close (2) with a lease the actor
// may no longer hold: unless it still holds it, it must change nothing.
func (m *simModel) staleOn(t *rapid.T, a *simActor, l simLate, what int) {
	// The position presented is past the stored one, so that a call that
	// lands shows: fenced, none may.
	shard, pos := l.lease.Shard, max(l.pos, 1)
	if ck, err := strconv.Atoi(m.rawCkpt(shard)); err == nil {
		pos = max(pos, ck+1)
	}
	before, ckBefore, markBefore, wasClosed := m.rawLease(shard), m.rawCkpt(shard), m.rawMark(shard), m.rawClosed(shard)
	var err error
	switch what {
	case 0:
		m.stats.staleCommits.Add(1)
		err = a.store.Commit(simCtx, l.lease, seqOf(pos))
		if ck := m.rawCkpt(shard); !holds(before, a.name, l.lease.Token) && ck != ckBefore && ck == strconv.Itoa(pos) {
			m.fail(t, "fencing", "%s's stale commit %d of %s landed while the lease read %q (its token %d)", a.name, pos, shard, before, l.lease.Token)
		}
	case 1:
		m.stats.staleMarks.Add(1)
		_, err = a.store.WriteDelivered(simCtx, a.name, []DeliveredMark{{Shard: shard, Token: l.lease.Token, Position: seqOf(pos + 1)}})
		if mk := m.rawMark(shard); !holds(before, a.name, l.lease.Token) && mk != markBefore && mk == strconv.Itoa(pos+1) {
			m.fail(t, "fencing", "%s's stale mark %d of %s landed while the lease read %q (its token %d)", a.name, pos+1, shard, before, l.lease.Token)
		}
	case 2:
		if !m.ended[shard] {
			return
		}
		m.stats.staleCloses.Add(1)
		err = a.store.CloseShard(simCtx, l.lease)
		if !wasClosed && m.rawClosed(shard) && !holds(before, a.name, l.lease.Token) {
			m.fail(t, "fencing", "%s's stale close of %s landed while the lease read %q (its token %d)", a.name, shard, before, l.lease.Token)
		}
	}
	m.logf("%s's stale call (%d) on %s token %d: %v", a.name, what, shard, l.lease.Token, err)
}

// Fault: FLUSHALL.
func (m *simModel) flushAll(t *rapid.T) {
	m.noteWipe()
	m.srv.flushAll(t)
	m.stats.flushes.Add(1)
	m.logf("FLUSHALL")
}

// Fault: Redis restarted empty: a new run, up for no time.
func (m *simModel) restartEmpty(t *rapid.T) {
	m.noteWipe()
	m.srv.restartEmpty(t)
	m.stats.restarts.Add(1)
	m.logf("Redis restarted empty")
}

// settle ends a schedule. First the actors awake run rounds for a lease
// period and more while the paused ones stay paused (a holder paused past
// its lease, and the newcomers that take over meanwhile); then every actor
// wakes and runs rounds, as the coordinator would, with the store up, and
// every shard the gate allows must have an owner within the bound.
func (m *simModel) settle(t *rapid.T) {
	stop := rapid.Bool().Draw(t, "the actors awake stop after their rounds")
	m.logf("settle: the actors awake run rounds (then stop: %v)", stop)
	m.srv.advance(m.period())
	for range 3 {
		m.srv.advance(m.period() / 2)
		m.rounds(t)
	}
	if stop {
		// A stop (or a hand-off) commits and releases every shard.
		for _, a := range m.actors {
			if !a.paused {
				for _, s := range slices.Sorted(maps.Keys(a.held)) {
					m.releaseShard(t, a, s)
				}
				m.check(t)
			}
		}
	}
	m.logf("settle: every actor wakes; rounds with the store up")
	for _, a := range m.actors {
		a.paused = false
		a.hook.armed = faultNone
	}
	rounds := 4 * int((consumer.RestartWait(m.period())+2*m.period())/(m.period()/2))
	for range rounds {
		m.srv.advance(m.period() / 2)
		m.rounds(t)
		if m.unowned() == "" && len(m.pending) == 0 {
			return
		}
	}
	if s := m.unowned(); s != "" {
		m.fail(t, "liveness", "shard %s has no owner after %d rounds with every actor live (lease %q)", s, rounds, m.rawLease(s))
	}
}

// rounds runs one full round of every actor awake, each step checked.
func (m *simModel) rounds(t *rapid.T) {
	for _, a := range m.actors {
		if a.paused {
			continue
		}
		if !a.joined {
			m.joinActor(a)
			m.check(t)
			continue
		}
		m.reseedActor(t, a)
		m.renewActor(a)
		for _, s := range simShards {
			if a.held[s] == nil {
				m.takeShard(t, a, s)
			}
			if a.held[s] != nil {
				m.deliverShard(t, a, s, 100)
				m.commitShard(t, a, s)
				m.closeHeld(t, a, s)
			}
		}
		m.check(t)
	}
}

// unowned returns a shard the gate allows that has no live lease, or "".
func (m *simModel) unowned() string {
	for _, s := range simShards {
		if !m.ready(s, m.closedAck) {
			continue
		}
		o, exp, _, ok := ParseLeaseValue(m.rawLease(s))
		if !ok || o == "" || !time.UnixMilli(exp).After(m.srv.now()) {
			return s
		}
	}
	return ""
}

// check is run after every step: no checkpoint passes a record no one
// delivered.
func (m *simModel) check(t *rapid.T) {
	m.stats.steps.Add(1)
	// A holder at the wipe that no longer holds any of its shards (it
	// learnt it lost them) has nothing left to win back.
	for name, shards := range m.pending {
		a := m.actor(name)
		for s := range shards {
			if a.held[s] == nil {
				delete(shards, s)
			}
		}
		if len(shards) == 0 {
			delete(m.pending, name)
		}
	}
	reseeded := m.reseeded
	m.reseeded = false
	for _, s := range simShards {
		raw := m.rawCkpt(s)
		cur := 0
		switch raw {
		case "":
		case consumer.ShardEnd:
			cur = len(m.records[s]) + 1
		default:
			cur, _ = strconv.Atoi(raw)
		}
		if last := m.lastCkpt[s]; cur != 0 && cur < last && !reseeded {
			m.fail(t, "regression", "the checkpoint of %s moved back from %d to %s", s, last, raw)
		}
		m.lastCkpt[s] = cur
	}
	if len(m.pending) > 0 {
		return
	}
	for _, s := range simShards {
		if m.orphaned[s] {
			continue
		}
		raw := m.rawCkpt(s)
		if raw == "" {
			continue
		}
		n := len(m.records[s])
		if raw != consumer.ShardEnd {
			n, _ = strconv.Atoi(raw)
		}
		from := max(1, m.owedFrom[s])
		for i := from; i <= n && i <= len(m.records[s]); i++ {
			r := m.records[s][i-1]
			if m.latest && r.written.Before(m.firstStart.Add(-consumer.LatestSkewMargin)) {
				continue
			}
			if len(r.deliveries) == 0 {
				kind := "skip"
				if m.doneAtReseed[s] {
					kind = "re-seed skip"
				}
				m.fail(t, kind, "the checkpoint of %s is %s, past record %d that no one delivered", s, raw, i)
			}
		}
	}
}

// simRealPeriod is the lease period against a real redis-server, whose
// clock the simulation cannot set: short, so that time passes by sleeping.
const simRealPeriod = 300 * time.Millisecond

// runSimulation runs schedules of the store protocol on srv: checks of
// them, each of about steps actions, from seed (0: rapid's own).
func runSimulation(t *testing.T, srv simServer, stats *simStats, checks, steps int, seed uint64) {
	t.Helper()
	for name, v := range map[string]string{"rapid.checks": strconv.Itoa(checks), "rapid.steps": strconv.Itoa(steps), "rapid.seed": strconv.FormatUint(seed, 10)} {
		if err := flag.Set(name, v); err != nil {
			t.Fatal(err)
		}
	}
	rapid.Check(t, func(rt *rapid.T) {
		stats.schedules.Add(1)
		m := newSimModel(rt, srv, stats, 3)
		defer func() {
			if r := recover(); r != nil {
				if k, ok := r.(simKnown); ok {
					stats.knownDefects.Add(1)
					if stats.knownDefects.Load() == 1 {
						t.Logf("known defect found (simKnownDefects), schedule passed: %s", string(k))
					}
					return
				}
				panic(r)
			}
		}()
		rt.Repeat(simWeighted(rt, simActions(m)))
		m.settle(rt)
	})
}

// simActions is the action set. rapid draws an action by its name's place
// in sorted order, favouring the first ones (and shrinks towards them), so
// the names are numbered: what an instance does most comes first.
func simActions(m *simModel) map[string]func(*rapid.T) {
	return map[string]func(*rapid.T){
		"01_round": m.round, "02_deliver": m.deliver, "03_commit": m.commit, "04_take": m.take,
		"05_advance": m.advance, "06_fault_pause_or_wake": m.pause, "07_fault_flushall": m.flushAll,
		"08_release": m.release, "09_produce": m.produce, "10_reshard": m.reshard,
		"11_fault_restart_empty": m.restartEmpty, "12_fault_late_commit": m.lateCommit,
		"13_fault_stale_call": m.staleCall, "14_fault_timeout": m.timeout, "15_reseed": m.reseed,
		"16_renew": m.renew, "17_close": m.closeShard, "18_join": m.join,
		"19_handoff_request": m.requestHandoff, "20_handoff_answer": m.answerHandoffs,
		"21_prune_or_discovery":     m.misc,
		"22_story_woken_holder":     m.storyWokenHolder,
		"23_story_commits_reorder":  m.storyCommitsReorder,
		"24_story_wipe_under_pause": m.storyWipeUnderPause,
		"":                          m.check,
	}
}

// simWeighted draws the schedule's own weight for every action (0 to 3;
// check keeps its place) and returns the action set with each action listed
// that many times, its copies spread over the sorted order. A schedule so
// is dense in a few kinds of step (stale calls, wipes, reshards) and reaches
// interleavings that a uniform draw over 24 actions reaches too rarely; the
// weights are drawn first, so a failing schedule shrinks them too.
func simWeighted(t *rapid.T, actions map[string]func(*rapid.T)) map[string]func(*rapid.T) {
	out := map[string]func(*rapid.T){}
	for _, name := range slices.Sorted(maps.Keys(actions)) {
		if name == "" {
			out[""] = actions[""]
			continue
		}
		w := rapid.IntRange(0, 3).Draw(t, "weight of "+name)
		for i := range w {
			out[fmt.Sprintf("%d_%s", i, name)] = actions[name]
		}
	}
	if len(out) == 1 {
		out["0_01_round"] = actions["01_round"]
	}
	return out
}

// Story: a holder paused past its lease wakes and, before any renewal tells
// it of the loss, sends a commit or a close with the lease it held (its
// commit loop was mid-flight): the others ran rounds meanwhile, so the
// shard is another's, or free. Fenced, neither may land.
func (m *simModel) storyWokenHolder(t *rapid.T) {
	a, shard := m.holding(t)
	tenths := rapid.IntRange(11, 30).Draw(t, "pause, tenths of a period")
	others := rapid.Bool().Draw(t, "the others run rounds meanwhile")
	closeIt := rapid.Bool().Draw(t, "close (else commit)")
	if a == nil {
		return
	}
	h := a.held[shard]
	a.paused = true
	m.stats.pauses.Add(1)
	m.logf("story: %s, holding %s token %d, pauses", a.name, shard, h.lease.Token)
	m.srv.advance(time.Duration(tenths) * m.period() / 10)
	if others {
		m.rounds(t)
	}
	a.paused = false
	m.stats.wakes.Add(1)
	what := 0
	if closeIt && (shard == "p1" || shard == "p2") {
		m.reshard(t)
		what = 2
	}
	if holds(m.rawLease(shard), a.name, h.lease.Token) {
		return // no one took it: still its own, not stale
	}
	m.staleOn(t, a, simLate{lease: h.lease, pos: h.pos}, what)
}

// Story: commits that arrive out of order: a commit is held by the network,
// the reader delivers on and commits further, then the held commit lands.
// The checkpoint must not move back.
func (m *simModel) storyCommitsReorder(t *rapid.T) {
	a, shard := m.holding(t)
	n := rapid.IntRange(1, 4).Draw(t, "records")
	if a == nil {
		return
	}
	h := a.held[shard]
	m.produce1(shard, n)
	m.deliverShard(t, a, shard, n)
	if h.pos == 0 || a.held[shard] != h {
		return
	}
	m.logf("story: %s's commit %s %d is held by the network", a.name, shard, h.pos)
	late := simLate{lease: h.lease, pos: h.pos}
	m.stats.lateCommits.Add(1)
	m.check(t)
	m.produce1(shard, n)
	m.deliverShard(t, a, shard, n)
	m.commitShard(t, a, shard)
	m.check(t)
	a.late = &late
	m.lateCommit(t)
}

// holding draws an actor that is not paused and a shard it holds, as a
// story's start: an actor that holds none joins (waiting as Join says),
// re-seeds when the store forgot, and takes the shard drawn, when the gate
// and the store let it. It returns nil when they do not.
func (m *simModel) holding(t *rapid.T) (*simActor, string) {
	a := m.pick(t)
	shard := rapid.SampledFrom(simShards).Draw(t, "shard to hold")
	if a == nil {
		return nil, ""
	}
	if len(a.held) > 0 {
		ss := slices.Sorted(maps.Keys(a.held))
		return a, ss[rapid.IntRange(0, len(ss)-1).Draw(t, "held shard")]
	}
	if !a.joined {
		m.joinActor(a)
		m.check(t)
	}
	if m.srv.now().Before(a.notBefore) {
		m.srv.advance(a.notBefore.Sub(m.srv.now()))
	}
	m.reseedActor(t, a)
	m.takeShard(t, a, shard)
	m.check(t)
	if a.held[shard] == nil {
		return nil, ""
	}
	return a, shard
}

// produce1 writes n records to a shard that takes writes.
func (m *simModel) produce1(shard string, n int) {
	if !m.listed(shard) || m.ended[shard] {
		return
	}
	for range n {
		m.records[shard] = append(m.records[shard], &simRecord{written: m.srv.now()})
	}
	m.logf("write %s records up to %d", shard, len(m.records[shard]))
}

// Story: the store forgets while a holder is paused; the others wait out
// the store's hold, take its shards (equal tokens, counted from an empty
// store) and read on; then the holder wakes and re-seeds: the tie rule
// must give it its shard back, its position with it, or its records are
// skipped.
func (m *simModel) storyWipeUnderPause(t *rapid.T) {
	a, shard := m.holding(t)
	restart := rapid.Bool().Draw(t, "restart empty (else FLUSHALL)")
	tenths := rapid.IntRange(11, 40).Draw(t, "pause, tenths of a period")
	if a == nil {
		return
	}
	m.logf("story: %s, holding %s, pauses across a wipe", a.name, shard)
	m.produce1(shard, 2)
	a.paused = true
	m.stats.pauses.Add(1)
	if restart {
		m.restartEmpty(t)
	} else {
		m.flushAll(t)
	}
	m.check(t)
	for range tenths / 5 {
		m.srv.advance(m.period() / 2)
		m.produce1(shard, 1)
		m.rounds(t)
	}
	a.paused = false
	m.stats.wakes.Add(1)
	m.logf("story: %s wakes", a.name)
}

// misc is a prune or a discovery round.
func (m *simModel) misc(t *rapid.T) {
	if rapid.Bool().Draw(t, "prune") {
		m.prune(t)
		return
	}
	m.discovery(t)
}

// TestSimulateStore is the CI slice of the store simulation on miniredis:
// it guards every invariant of the store protocol (no skip, fencing, the
// gate, marks, liveness) over thousands of random fault schedules. `make
// simulate` runs it long (-sim.duration, -sim.seed, -sim.strict).
func TestSimulateStore(t *testing.T) {
	srv := newMiniServer(t)
	stats := &simStats{}
	checks, steps := simDefaultSchedules, 30
	if *simDuration > 0 {
		checks = 200 // per batch; each batch has its own seed
	}
	if *simChecks > 0 {
		checks = *simChecks
	}
	if *simSteps > 0 {
		steps = *simSteps
	}
	seed := *simSeed
	switch {
	case seed == 0 && *simChecks == 0 && *simDuration == 0:
		// A plain `go test` (make unit) runs a fixed slice, so a run of
		// the suite is reproducible; make simulate explores from the clock.
		seed = 1
	case seed == 0:
		seed = uint64(time.Now().UnixNano())
	}
	start := time.Now()
	batches := 0
	// rapid ends the test's goroutine on a failure: the summary is deferred.
	defer func() {
		el := time.Since(start)
		if t.Failed() {
			t.Logf("replay: make simulate LAYER=store SEED=%d SCHEDULES=%d STEPS=%d", seed+uint64(batches), checks, steps)
		}
		t.Logf("store simulation: seed=%d batches=%d %s; %.1f schedules/s (%v)", seed, batches, stats, float64(stats.schedules.Load())/el.Seconds(), el.Round(time.Millisecond))
	}()
	for {
		runSimulation(t, srv, stats, checks, steps, seed+uint64(batches))
		batches++
		if *simDuration == 0 || time.Since(start) >= *simDuration {
			break
		}
	}
}

// TestIntegrationSimulateStoreRedis runs the same actions against a real
// redis-server, at a smaller count, so that miniredis never stands in for
// Redis unchecked. Time passes by sleeping (a short lease period).
func TestIntegrationSimulateStoreRedis(t *testing.T) {
	r := testenv.NewRedis(t)
	admin := r.Client()
	t.Cleanup(func() { _ = admin.Close() })
	stats := &simStats{}
	start := time.Now()
	runSimulation(t, &realServer{r: r, adminCli: admin}, stats, 10, 25, *simSeed)
	el := time.Since(start)
	t.Logf("store simulation on redis-server: %s; %.1f schedules/s", stats, float64(stats.schedules.Load())/el.Seconds())
}

// TestSimulateStoreReseedAfterWipeKeepsPausedHoldersPosition replays the
// schedule of issue 59 item 2 through the simulation's model: holder i0 is
// paused across a FLUSHALL; newcomer i1 takes i0's parent shard under
// `latest`, reaches its end at once and closes it; i0 wakes and re-seeds.
// While simKnownDefects holds "re-seed skip" it asserts the model sees the
// skip (so the invariant can fail); once the fix is merged and the entry
// removed, it asserts the schedule passes.
func TestSimulateStoreReseedAfterWipeKeepsPausedHoldersPosition(t *testing.T) {
	srv := newMiniServer(t)
	stats := &simStats{}
	var found string
	scriptedOnce(t)
	rapid.Check(t, func(rt *rapid.T) {
		m := newSimModel(rt, srv, stats, 2)
		m.latest = true
		h, n := m.actors[0], m.actors[1]
		defer func() {
			if r := recover(); r != nil {
				k, ok := r.(simKnown)
				if !ok {
					panic(r)
				}
				found = string(k)
				t.Logf("schedule:\n  %s", strings.Join(m.log, "\n  "))
			}
		}()
		step := func(f func()) { f(); m.check(rt) }
		step(func() {
			wait, err := h.store.Join(simCtx)
			if err != nil {
				rt.Fatal(err)
			}
			h.joined, h.notBefore = true, m.srv.now().Add(wait)
		})
		step(func() { m.srv.advance(3 * time.Second) })
		for range 3 {
			m.records["p1"] = append(m.records["p1"], &simRecord{written: m.srv.now()})
		}
		step(func() { m.takeShard(rt, h, "p1") })
		step(func() { m.deliverShard(rt, h, "p1", 2) })
		step(func() { m.commitShard(rt, h, "p1") })
		step(func() { m.srv.advance(time.Second) })
		m.records["p1"] = append(m.records["p1"], &simRecord{written: m.srv.now()})
		step(func() { h.paused = true; m.flushAll(rt) })
		step(func() { m.srv.advance(10 * time.Second) })
		step(func() {
			wait, err := n.store.Join(simCtx)
			if err != nil {
				rt.Fatal(err)
			}
			n.joined, n.notBefore = true, m.srv.now().Add(wait)
		})
		step(func() { m.srv.advance(3 * time.Second) })
		step(func() { m.reshard(rt) })
		step(func() { m.takeShard(rt, n, "p1") })
		step(func() { m.closeHeld(rt, n, "p1") })
		step(func() { h.paused = false; m.reseedActor(rt, h) })
		m.settle(rt)
	})
	if simKnownDefects["re-seed skip"] {
		if found == "" {
			t.Fatal("the model did not see the skip of issue 59 item 2 on code that has it")
		}
		t.Logf("known defect seen: %s", found)
	} else if found != "" {
		t.Fatal(found)
	}
}

// TestSimulateStoreFailedReseedMarks guards "failed re-seed marks": a
// holder whose re-seed won its shard back from a newcomer, but whose reply
// was lost (the script ran, the call timed out), read on after its next
// renewal with its take's mark, and delivered the records the newcomer had
// delivered meanwhile again unmarked.
func TestSimulateStoreFailedReseedMarks(t *testing.T) {
	srv := newMiniServer(t)
	stats := &simStats{}
	var found string
	scriptedOnce(t)
	rapid.Check(t, func(rt *rapid.T) {
		m := newSimModel(rt, srv, stats, 2)
		m.latest = false
		h, n := m.actors[0], m.actors[1]
		defer func() {
			if r := recover(); r != nil {
				k, ok := r.(simKnown)
				if !ok {
					panic(r)
				}
				found = string(k)
				t.Logf("schedule:\n  %s", strings.Join(m.log, "\n  "))
			}
		}()
		step := func(f func()) { f(); m.check(rt) }
		join := func(a *simActor) {
			wait, err := a.store.Join(simCtx)
			if err != nil {
				rt.Fatal(err)
			}
			a.joined, a.notBefore = true, m.srv.now().Add(wait)
		}
		step(func() { join(h) })
		step(func() { m.srv.advance(3 * time.Second) })
		step(func() { m.takeShard(rt, h, "s0") })
		step(func() { m.flushAll(rt) })
		step(func() { join(n) })
		step(func() { m.srv.advance(3 * time.Second) })
		step(func() { m.takeShard(rt, n, "s0") })
		step(func() { m.deliverShard(rt, n, "s0", 2) })
		step(func() {
			if err := h.seen(h.store.CheckGroup(simCtx)); err == nil {
				rt.Fatal("the holder's group check found the group record it knows after the wipe")
			}
		})
		step(func() {
			h.hook.armed = faultRanThenTimeout
			m.reseedActor(rt, h)
			if !h.hook.ran {
				rt.Fatal("the re-seed did not run")
			}
		})
		if !holds(m.rawLease("s0"), h.name, h.held["s0"].lease.Token) {
			rt.Fatalf("the re-seed whose reply was lost did not win s0 back: lease %q", m.rawLease("s0"))
		}
		step(func() { m.renewActor(h) })
		step(func() { m.deliverShard(rt, h, "s0", 2) })
		if got := len(m.records["s0"][0].deliveries); got != 2 {
			rt.Fatalf("s0 record 1 was delivered %d times, want 2 (the newcomer's, then the holder's)", got)
		}
	})
	if found != "" {
		t.Fatal(found)
	}
}

// TestSimulateStoreLostRecordSkip guards "lost-record skip": a holder of
// the kept group record took a shard from `latest` that a newcomer of a
// later record had read from its own, later start; after a wipe the
// newcomer's re-seed, whose record lost, wrote its position into the
// shard the store no longer knew, and once the newcomer's lease lapsed
// another instance took the shard from there, while the paused holder
// came back too late to win it back: the records between the two starts
// were never delivered (simulation seed 2, schedule 2548).
func TestSimulateStoreLostRecordSkip(t *testing.T) {
	srv := newMiniServer(t)
	stats := &simStats{}
	var found string
	scriptedOnce(t)
	rapid.Check(t, func(rt *rapid.T) {
		m := newSimModel(rt, srv, stats, 3)
		m.latest = true
		h, n, k := m.actors[0], m.actors[1], m.actors[2]
		defer func() {
			if r := recover(); r != nil {
				kn, ok := r.(simKnown)
				if !ok {
					panic(r)
				}
				found = string(kn)
				t.Logf("schedule:\n  %s", strings.Join(m.log, "\n  "))
			}
		}()
		step := func(f func()) { f(); m.check(rt) }
		write := func(shard string, n int) {
			for range n {
				m.records[shard] = append(m.records[shard], &simRecord{written: m.srv.now()})
			}
		}
		hold := m.period() + 3*time.Second
		// The kept record: h's, the earliest.
		step(func() { m.joinActor(h) })
		step(func() { m.srv.advance(3 * time.Second) })
		write("s0", 1)
		step(func() { m.takeShard(rt, h, "p2") })
		step(func() { m.srv.advance(time.Second) })
		// A wipe while h is paused; n makes a later record and reads s0 from
		// its start: the records written before it are behind n's position.
		step(func() { h.paused = true; m.flushAll(rt) })
		step(func() { m.srv.advance(10 * time.Second) })
		write("s0", 2)
		step(func() { m.srv.advance(10 * time.Second) })
		step(func() { m.joinActor(n) })
		step(func() { m.srv.advance(3 * time.Second) })
		step(func() { m.takeShard(rt, n, "s0") })
		if n.held["s0"] == nil {
			rt.Fatal("the newcomer did not take s0")
		}
		// n pauses across two wipes; h re-seeds its record after each, and
		// s0, known to no one awake, waits the re-seed hold.
		step(func() { n.paused = true; h.paused = false; m.flushAll(rt) })
		step(func() { m.reseedActor(rt, h) })
		step(func() { m.srv.advance(time.Second) })
		step(func() { m.flushAll(rt) })
		step(func() { m.reseedActor(rt, h) })
		step(func() { m.joinActor(k) })
		step(func() { m.srv.advance(hold) })
		step(func() { m.renewActor(h) })
		// k, under h's record, takes s0 from that record's `latest`: from
		// before the newcomer's position.
		step(func() { m.takeShard(rt, k, "s0") })
		if k.held["s0"] == nil || k.held["s0"].pos >= n.held["s0"].pos {
			rt.Fatalf("k did not take s0 from before the newcomer's position:\n  %s", strings.Join(m.log, "\n  "))
		}
		// k pauses across a wipe; h re-seeds first, then n wakes and
		// re-seeds under its record, which loses.
		step(func() { k.paused = true; m.flushAll(rt) })
		step(func() { m.reseedActor(rt, h) })
		step(func() { n.paused = false; m.reseedActor(rt, n) })
		// n is cut off again, k stays paused past the hold: h takes s0.
		step(func() { n.paused = true })
		step(func() { m.srv.advance(hold + m.period()) })
		step(func() { m.renewActor(h) })
		step(func() { m.takeShard(rt, h, "s0") })
		if h.held["s0"] == nil {
			rt.Fatal("h did not take s0 once the newcomer's lease and the hold ran out")
		}
		step(func() { m.deliverShard(rt, h, "s0", 100) })
		step(func() { m.commitShard(rt, h, "s0") })
		m.settle(rt)
	})
	if found != "" {
		t.Fatal(found)
	}
}

// TestSimulateStoreLearnedProvisionalCloseSkip guards the skip of store
// seed 41: an instance whose record lost learns from the store a close its
// own record's world made (provisional under the kept record), and after
// the next wipe, now presenting the kept record, re-seeds that close as the
// kept record's over a shard another instance reads from the kept record's
// earlier start, past a record no one delivered.
func TestSimulateStoreLearnedProvisionalCloseSkip(t *testing.T) {
	srv := newMiniServer(t)
	stats := &simStats{}
	scriptedOnce(t)
	rapid.Check(t, func(rt *rapid.T) {
		m := newSimModel(rt, srv, stats, 3)
		m.latest = true
		h, n, k := m.actors[0], m.actors[1], m.actors[2]
		write, fatal := m.writeNow, m.fatalWithSchedule(rt)
		hold := m.period() + 3*time.Second
		// The kept record: h's, the earliest. A record of p1 is written
		// after its start, so it is owed.
		m.joinActor(h)
		m.joinActor(k)
		m.srv.advance(3 * time.Second)
		write("p1", 1)
		m.takeShard(rt, h, "s0")
		// A wipe while h is paused: n makes a later record, takes p1 from
		// its own `latest` (past p1's record) and closes it at its end.
		h.paused, k.paused = true, true
		m.restartEmpty(rt)
		m.srv.advance(10 * time.Second)
		m.joinActor(n)
		m.srv.advance(n.notBefore.Sub(m.srv.now()))
		m.reshard(rt)
		m.takeShard(rt, n, "p1")
		if n.held["p1"] == nil || n.held["p1"].pos != len(m.records["p1"]) {
			fatal("n did not take p1 past its record")
		}
		m.closeHeld(rt, n, "p1")
		if !m.rawClosed("p1") {
			fatal("n did not close p1")
		}
		// n reads p2 on across the next wipe.
		m.takeShard(rt, n, "p2")
		if n.held["p2"] == nil {
			fatal("n did not take p2")
		}
		// h wakes and re-seeds: its record is kept, n's close of p1 is
		// provisional. n finds its record lost, re-seeds, and learns the
		// store's closed set again, p1's provisional close in it.
		h.paused = false
		m.reseedActor(rt, h)
		m.renewActor(n)
		m.reseedActor(rt, n)
		m.takeShard(rt, n, "c")
		if !n.closed["p1"] {
			fatal("n did not learn p1's close from the store")
		}
		// Another wipe. h re-seeds its record; after the hold k, under it,
		// takes p1 from the kept record's start, before p1's record.
		m.restartEmpty(rt)
		m.reseedActor(rt, h)
		m.srv.advance(hold)
		k.paused = false
		m.reseedActor(rt, k)
		m.renewActor(h)
		m.takeShard(rt, k, "p1")
		if k.held["p1"] == nil || k.held["p1"].pos >= len(m.records["p1"]) {
			fatal("k did not take p1 from before its record")
		}
		// n finds its lease of p2 gone and re-seeds, now presenting the
		// kept record: the close it learned is no close of that record's
		// holders.
		m.renewActor(n)
		m.reseedActor(rt, n)
		if m.rawCkpt("p1") == consumer.ShardEnd || m.rawClosed("p1") {
			fatal("n's re-seed closed p1 (checkpoint %q) while k reads it from before record %d, which no one delivered", m.rawCkpt("p1"), len(m.records["p1"]))
		}
	})
}

// TestSimulateStoreOwnCloseUnderProvisionalLeaseSkip guards a variant of
// store seed 41: an instance whose record lost keeps its lease of a shard
// (provisional under the kept record) and closes it itself, from its own,
// later `latest`; its own close dropped what it had noted, so after the
// next wipe, presenting the kept record, it re-seeded that close as the
// kept record's over a shard another instance reads from the kept
// record's earlier start, past a record no one delivered.
func TestSimulateStoreOwnCloseUnderProvisionalLeaseSkip(t *testing.T) {
	srv := newMiniServer(t)
	stats := &simStats{}
	scriptedOnce(t)
	rapid.Check(t, func(rt *rapid.T) {
		m := newSimModel(rt, srv, stats, 3)
		m.latest = true
		h, n, k := m.actors[0], m.actors[1], m.actors[2]
		write, fatal := m.writeNow, m.fatalWithSchedule(rt)
		hold := m.period() + 3*time.Second
		m.joinActor(h)
		m.joinActor(k)
		m.srv.advance(3 * time.Second)
		write("p1", 1)
		m.takeShard(rt, h, "s0")
		// A wipe while h and k are paused: n makes a later record and
		// takes p1 from its own `latest`, past p1's record, and p2.
		h.paused, k.paused = true, true
		m.restartEmpty(rt)
		m.srv.advance(10 * time.Second)
		m.joinActor(n)
		m.srv.advance(n.notBefore.Sub(m.srv.now()))
		m.reshard(rt)
		m.takeShard(rt, n, "p1")
		if n.held["p1"] == nil || n.held["p1"].pos != len(m.records["p1"]) {
			fatal("n did not take p1 past its record")
		}
		m.takeShard(rt, n, "p2")
		if n.held["p2"] == nil {
			fatal("n did not take p2")
		}
		// h wakes and re-seeds: its record is kept, n's leases are
		// provisional. n finds its record lost and keeps its leases.
		h.paused = false
		m.reseedActor(rt, h)
		m.renewActor(n)
		m.reseedActor(rt, n)
		if n.held["p1"] == nil {
			fatal("n lost its lease of p1 at its re-seed")
		}
		// n closes p1 itself, under its provisional lease.
		m.closeHeld(rt, n, "p1")
		if !m.rawClosed("p1") {
			fatal("n did not close p1")
		}
		// Another wipe before n reads the closed set again. h re-seeds its
		// record; after the hold k, under it, takes p1 from the kept
		// record's start, before p1's record.
		m.restartEmpty(rt)
		m.reseedActor(rt, h)
		m.srv.advance(hold)
		k.paused = false
		m.reseedActor(rt, k)
		m.renewActor(h)
		m.takeShard(rt, k, "p1")
		if k.held["p1"] == nil || k.held["p1"].pos >= len(m.records["p1"]) {
			fatal("k did not take p1 from before its record")
		}
		m.renewActor(n)
		m.reseedActor(rt, n)
		if m.rawCkpt("p1") == consumer.ShardEnd || m.rawClosed("p1") {
			fatal("n's re-seed closed p1 (checkpoint %q) while k reads it from before record %d, which no one delivered", m.rawCkpt("p1"), len(m.records["p1"]))
		}
	})
}

// TestSimulateStoreHandedBackPositionSkip guards the skip of a position an
// instance kept after handing a shard back. A newcomer n reads s0 from its
// own, later `latest` on an emptied store; its record loses at its re-seed
// and it reads s0 on provisionally, then hands it back. The paused holder h
// wakes and claims s0 back with its earlier position, under a token no
// higher than n's (tokens started again at 1 on the emptied store, so no
// balancing round tells n that a newer owner holds it). After the next
// wipe, n (first to see it) re-seeded its handed-back position, which the
// store kept as the later one over h's: past records no one delivered.
//
// Guards: a shard's position stayed known after its reader handed it back
// (the skip: "the checkpoint of s0 is 7, past record 4 that no one
// delivered").
func TestSimulateStoreHandedBackPositionSkip(t *testing.T) {
	srv := newMiniServer(t)
	stats := &simStats{}
	scriptedOnce(t)
	rapid.Check(t, func(rt *rapid.T) {
		m := newSimModel(rt, srv, stats, 3)
		m.latest = true
		a, h, n := m.actors[0], m.actors[1], m.actors[2]
		write, fatal := m.writeNow, m.fatalWithSchedule(rt)
		step := func(f func()) { f(); m.check(rt) }
		m.joinActor(a)
		m.joinActor(h)
		m.srv.advance(3 * time.Second)
		write("s0", 1)
		step(func() { m.takeShard(rt, h, "s0") })
		step(func() { m.deliverShard(rt, h, "s0", 100) })
		step(func() { m.commitShard(rt, h, "s0") })
		if h.held["s0"] == nil || h.held["s0"].committed != len(m.records["s0"]) {
			fatal("h did not take, read and commit s0")
		}
		// A wipe while a and h are paused; records come that only h's
		// world would read, then n makes a later record and takes s0 from
		// its own `latest`, past them.
		a.paused, h.paused = true, true
		step(func() { m.restartEmpty(rt) })
		m.srv.advance(10 * time.Second)
		write("s0", 2)
		m.srv.advance(10 * time.Second)
		m.joinActor(n)
		m.srv.advance(n.notBefore.Sub(m.srv.now()))
		step(func() { m.takeShard(rt, n, "s0") })
		if n.held["s0"] == nil || n.held["s0"].pos != len(m.records["s0"]) {
			fatal("n did not take s0 past the records written after the wipe")
		}
		write("s0", 1)
		step(func() { m.deliverShard(rt, n, "s0", 100) })
		step(func() { m.commitShard(rt, n, "s0") })
		// a wakes and re-seeds its record, which is kept: s0 is
		// provisional. n finds its record lost and reads s0 on.
		a.paused = false
		step(func() { m.reseedActor(rt, a) })
		step(func() { m.renewActor(n) })
		if n.held["s0"] == nil {
			fatal("n lost s0 at its re-seed")
		}
		// n reads on and hands s0 back (a hand-off): commit, release.
		write("s0", 1)
		step(func() { m.deliverShard(rt, n, "s0", 100) })
		step(func() { m.releaseShard(rt, n, "s0") })
		if n.held["s0"] != nil {
			fatal("n did not hand s0 back")
		}
		// h wakes: its renewal finds s0 provisional and re-seeds, which
		// claims s0 back at h's position, under h's token.
		h.paused = false
		step(func() { m.renewActor(h) })
		if h.held["s0"] == nil || m.rawCkpt("s0") != strconv.Itoa(h.held["s0"].pos) {
			fatal("h did not claim s0 back at its position (checkpoint %q)", m.rawCkpt("s0"))
		}
		// The next wipe: n sees it first and re-seeds; h's renewal finds
		// its lease unknown and re-seeds.
		step(func() { m.restartEmpty(rt) })
		step(func() { m.reseedActor(rt, n) })
		step(func() { m.renewActor(h) })
		if h.held["s0"] == nil {
			fatal("h lost s0 at its re-seed")
		}
	})
}

// scriptedOnce has rapid run a scripted schedule's property once, one
// step, from seed 1: the schedule drives the model by hand.
func scriptedOnce(t *testing.T) {
	t.Helper()
	for name, v := range map[string]string{"rapid.checks": "1", "rapid.steps": "1", "rapid.seed": "1"} {
		if err := flag.Set(name, v); err != nil {
			t.Fatal(err)
		}
	}
}

// writeNow writes c records to shard at the store's time.
func (m *simModel) writeNow(shard string, c int) {
	for range c {
		m.records[shard] = append(m.records[shard], &simRecord{written: m.srv.now()})
	}
}

// fatalWithSchedule fails a scripted schedule with the steps it ran.
func (m *simModel) fatalWithSchedule(rt *rapid.T) func(format string, args ...any) {
	return func(format string, args ...any) {
		rt.Fatalf(format+"\n  %s", append(args, strings.Join(m.log, "\n  "))...)
	}
}
