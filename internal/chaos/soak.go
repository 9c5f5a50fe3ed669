package chaos

import (
	"context"
	"fmt"
	"io"
	"math"
	"math/rand/v2"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/connect-kinesis/connect-kinesis/internal/faultproxy"
	"github.com/connect-kinesis/connect-kinesis/internal/testenv"
	"github.com/connect-kinesis/connect-kinesis/plugins/checkpointer"
)

// SoakConfig is one soak: the chaos suite's processes, fault proxy and
// checker under a schedule drawn from Seed (issue 34).
type SoakConfig struct {
	Binary, Dir string
	Seed        uint64
	// Duration is the load's length; faults are drawn inside it, then the
	// instances drain what is left.
	Duration time.Duration
	// Instances is how many input processes run all along (default 3); the
	// scale class adds up to two more for a while.
	Instances int
	// Classes are the fault classes switched on (default: every class but
	// those DefaultOff lists); see SoakClasses.
	Classes []string
	// Logf reports progress; nil is quiet.
	Logf func(format string, args ...any)
	// Out receives the report (the seed, the schedule as it ran, and last
	// the verdict line).
	Out io.Writer
	// Started, if set, is given every PID the soak starts.
	Started func(pid int)
}

// soakPlan is the fixed shape around the drawn schedule.
var soakPlan = Plan{
	LeasePeriod:   3 * time.Second,
	Rebalance:     time.Second,
	CommitPeriod:  500 * time.Millisecond,
	RestartAfter:  time.Second,
	BatchInterval: 200 * time.Millisecond,
}

// Bounds of the invariants checked while the soak runs.
const (
	// livenessBound: a record in the stream is delivered at most this long
	// after it was seen there, or after the last fault on its stream ended.
	livenessBound = 30 * time.Second
	// budgetWaitBound: no shard waits for the byte budget longer than this
	// (the instances' lag_warn_threshold, see soak_budget.go).
	budgetWaitBound = 30 * time.Second
	// rssMarginMiB is what an instance may hold above its byte budget.
	rssMarginMiB = 150
	// budgetBytes and smallBudgetBytes are the instances' max_buffered_bytes
	// without and with the budget class. The small one is still a fifth of
	// one 10 MiB answer, and every shard asks for half of it at most (two
	// full requests at a time per instance), but it lets soak-big keep up: a shard behind
	// asks Kinesis for as many records as half the budget holds while read
	// (budget.WhileReading), and with shard_max_in_flight 1 reads that many
	// per round trip (fetch, pipeline, ack). Under 512 KiB that was one
	// 96 KiB record per round trip, and the round trip on the loaded
	// machine took longer than the 500 ms between soak-big's records, so it
	// fell minutes behind in every long run; 2 MiB gives it 7
	// (TestSoakBigKeepsUpUnderTheSmallBudget).
	budgetBytes      = 16 << 20
	smallBudgetBytes = 2 << 20
	// holdBack: deliveries younger than this are checked on a later tick, so
	// lines of several instances are checked in the order of their times.
	holdBack = 3 * time.Second
	// poisonRetryBound is how recently the holder of a shard held at an
	// uncharged poison record must have handed it over: its retries come
	// at most 5 s apart (the input's backoff), and the monitor sees them
	// holdBack late.
	poisonRetryBound = 5*time.Second + holdBack + 5*time.Second
	tick             = 2 * time.Second
)

// soakStream is one stream of the load.
type soakStream struct {
	name        string
	shards      int
	keys        int
	every       time.Duration // one record per key per interval
	aggregation bool          // the producer writes KPL aggregates
	padKiB      int           // each record carries this much padding
	scoped      bool          // denied and resharded by the schedule
	store       *checkpointer.Store
	// label names the stream in the deliveries and the checks: its name,
	// or for the streams class's incarnations name#n (soak_streams.go).
	label string
	// The streams class's incarnations (dyn): created during the run
	// (during, so the new-stream bound is judged), its producer, when it
	// was ACTIVE, when its producer stopped for a deletion (drainFrom),
	// when it was deleted; judgedAt and unread are the monitor's count of
	// its records not yet delivered, from a read of the stream after
	// drainFrom. Under soak.smu once the incarnation is in soak.dyn.
	dyn, during                          bool
	producer                             *child
	active, drainFrom, deleted, judgedAt time.Time
	unread                               int
	// reshard lets one split or merge of the stream run at a time: two
	// drawn close together met a shard still being split (seed 3, 1 h:
	// ResourceInUseException, "shard is not active", ended the soak).
	reshard sync.Mutex
}

// efoBigBytes is the most of soak-big's records a run with the efo class
// writes in all. kinesis-mock answers a SubscribeToShard with an event of
// every record from the starting position on (up to 10,000, with no cap on
// their bytes), and builds it in its one Node thread. Measured alone: 1,000
// of soak-big's records (94 MiB) took 40 s, during which its TLS port
// completed no handshake while its plain port answered in 40 ms; 4,500
// (422 MiB) grew its heap to the 12 GiB limit and neither port answered
// for minutes. A fan-out reader that subscribes at trim_horizon (after a
// wipe of Redis) or at an old checkpoint asks for that much: at one record
// a second per key soak-big holds 675 MiB at the end of an hour, and four
// hours with efo lost kinesis-mock that way (seeds 11 to 14). 32 MiB keeps
// any such event under about 15 s of the emulator's time.
const efoBigBytes = 32 << 20

// soakBig is the budget class's stream of large records, read under
// smallBudgetBytes, for a load of length d. With the efo class its
// producer writes more slowly in a long run, so that the whole stream stays
// within efoBigBytes; its records stay 96 KiB.
func soakBig(d time.Duration, efo bool) *soakStream {
	st := &soakStream{name: "soak-big", shards: 1, keys: 2, every: time.Second, padKiB: 96}
	if efo {
		written := d.Seconds() / st.every.Seconds() * float64(st.keys*st.padKiB<<10)
		if f := math.Ceil(written / efoBigBytes); f > 1 {
			st.every *= time.Duration(f)
		}
	}
	return st
}

// soak is one run.
type soak struct {
	*runner
	sc      SoakConfig
	on      map[string]bool
	streams []*soakStream
	outRNG  *rand.Rand // draws each incarnation's output behaviour
	efoRNG  *rand.Rand // draws which incarnations read with enhanced fan-out (efo class)
	start   time.Time

	// redisMu makes Redis faults take turns: two on the one server at once
	// (a pause drawn while a restart has it down) are no fault the design
	// names, and a pause of the stopped process failed the soak ("no such
	// process", seed 3, 1 h, at 4 min 28 s).
	redisMu sync.Mutex

	smu sync.Mutex
	// shadowFailed is why the shadow's last poll of each stream failed
	// ("" when it did not), copied from the monitor's shadow.
	shadowFailed map[string]string
	timeline     []string     // the schedule as it ran
	events       []timedEvent // the same, with times, for a failure's context
	active       map[string]int
	quiet        map[string]time.Time // per scope ("" global): when its last fault ended
	denied       map[string]bool
	storm        int             // storms under way
	busy         map[string]bool // instances under a fault
	// emuStalls counts the stalls of kinesis-mock's TLS port seen so far,
	// emuStalled their time, emuStallSince when the current one began
	// (zero when none; soak_emulator.go).
	emuStalls     int
	emuStalled    time.Duration
	emuStallSince time.Time
	// emuRefusedSince is when the TLS port began refusing connections
	// (zero while it does not), emuGone why the emulator is taken for gone
	// (soak_emulator.go).
	emuRefusedSince time.Time
	emuGone         error
	// withholdings are the faults that withheld deliveries (soak_withhold.go),
	// under smu.
	withholdings []*withholding
	kicks        int
	incN         map[string]int  // incarnations started per instance name
	stopped      map[string]bool // incarnations the soak stopped
	nackers      map[string]bool // incarnations whose output nacks (under mu)
	pids         []int
	wiped        bool // a wipe since the last checkpoint poll
	wipes        int  // wipes so far
	// listedShards is each stream's (by label) shards as last listed
	// before a wipe: a listing that fails then still names them
	// (holdersBeforeWipe).
	listedShards map[string][]string
	// paused holds the pids of the instances under SIGSTOP now.
	paused map[int]bool
	// outages holds, for each instance paused or cut off from Redis so
	// far, when the last such outage ended (the zero time while it lasts):
	// a holder out of reach in the lease after a wipe cannot write its
	// shards back (soak_wipe.go).
	outages map[int]time.Time
	// incPids maps each incarnation to its pid, plain the incarnations
	// whose output is a file with no slow step or nacks (both under mu).
	incPids map[string]int
	plain   map[string]bool
	// slowPace is how long the slow step of each incarnation with a slow
	// output sleeps per message (output class; under mu).
	slowPace map[string]time.Duration
	// fanOut holds the incarnations that read with enhanced fan-out (efo
	// class; under mu).
	fanOut map[string]bool
	// redisCuts holds each instance's proxy to Redis (redis-cut class;
	// under mu).
	redisCuts map[string]*testenv.TCPProxy
	// The streams class: every incarnation so far (under smu), the names
	// created so far, one operation at a time (dynMu), and the group's
	// store, from which each new stream's is made.
	dyn      []*soakStream
	dynNames int
	dynMu    sync.Mutex
	base     *checkpointer.Checkpointer
	// The failover classes (soak_failover.go): the replica, its link to
	// the master, the front every client reaches the master through, and
	// the instances' min_replicas_to_ack. red and replica trade places at
	// each promotion, under redisMu.
	failoverOn  bool
	minReplicas int
	// promoter is who promotes the replica. With the failover-sentinel
	// classes the instances and the soak's client reach the master through
	// sentinel, which promotes the replica (soak_sentinel.go); there is no
	// front. With the failover-cluster ones they reach cluster, a Redis
	// Cluster, through its slot map (soak_cluster.go); red and replica are
	// nil there, and no front either.
	promoter    promoter
	sentinel    *testenv.Sentinel
	sentinelDir string
	cluster     *testenv.RedisCluster
	replica     *testenv.Redis
	replLink    *testenv.TCPProxy
	redisFront  *testenv.TCPProxy
	// redisInputURL is the instances' Redis URL (through the front with
	// the failover classes), redisTarget the address the redis-cut
	// proxies forward to; fixed at set-up.
	redisInputURL, redisTarget string
	// loadOver is set when the load ends: the streams class creates
	// nothing after it (under smu).
	loadOver bool
}

type timedEvent struct {
	at   time.Time
	text string
}

// RunSoak runs one soak and returns its verdict; the report went to Out.
// An error means the soak could not be carried out.
func RunSoak(ctx context.Context, sc SoakConfig) (Verdict, error) {
	if sc.Instances <= 0 {
		sc.Instances = 3
	}
	if sc.Duration <= 0 {
		sc.Duration = 10 * time.Minute
	}
	if sc.Out == nil {
		sc.Out = io.Discard
	}
	classes := sc.Classes
	if len(classes) == 0 {
		classes = DefaultClasses()
	}
	on := map[string]bool{}
	for _, c := range classes {
		if !isClass(c) {
			return Verdict{}, fmt.Errorf("unknown fault class %q; the classes are %s", c, strings.Join(SoakClasses(), ", "))
		}
		on[c] = true
	}
	s := &soak{
		sc: sc, on: on,
		outRNG: rand.New(rand.NewPCG(sc.Seed, sc.Seed^0x5eed)),
		efoRNG: rand.New(rand.NewPCG(sc.Seed, sc.Seed^0xef0)),
		active: map[string]int{}, quiet: map[string]time.Time{}, denied: map[string]bool{},
		incN: map[string]int{}, stopped: map[string]bool{}, nackers: map[string]bool{}, busy: map[string]bool{}, paused: map[int]bool{}, outages: map[int]time.Time{},
		incPids: map[string]int{}, plain: map[string]bool{}, slowPace: map[string]time.Duration{}, fanOut: map[string]bool{}, redisCuts: map[string]*testenv.TCPProxy{},
	}
	s.runner = &runner{
		cfg: Config{Binary: sc.Binary, Dir: sc.Dir, Seed: sc.Seed, Logf: sc.Logf, Started: func(pid int) {
			s.smu.Lock()
			s.pids = append(s.pids, pid)
			s.smu.Unlock()
			if sc.Started != nil {
				sc.Started(pid)
			}
		}},
		plan: soakPlan, logf: sc.Logf,
		rng:       rand.New(rand.NewPCG(sc.Seed, sc.Seed+1)),
		instances: map[string]*incarnation{}, counter: map[string]int{},
	}
	s.minReplicas, s.promoter, s.failoverOn = failoverMode(on, sc.Seed)
	if s.promoter == promoterSentinel && on[ClassRedisCut] {
		// The Sentinel names the master's own address, so an instance's
		// proxy to it would be bypassed.
		return Verdict{}, fmt.Errorf("the redis-cut class cannot run with %s: the instances reach the master Sentinel names, not a proxy", failoverClass(s.minReplicas, promoterSentinel))
	}
	if s.promoter == promoterCluster {
		if err := clusterRefuses(on); err != nil {
			return Verdict{}, fmt.Errorf("%s: %w", failoverClass(s.minReplicas, promoterCluster), err)
		}
	}
	if s.logf == nil {
		s.logf = func(string, ...any) {}
	}
	s.streams = []*soakStream{
		{name: "soak-a", shards: 3, keys: 6, every: 250 * time.Millisecond, scoped: true},
		{name: "soak-b", shards: 2, keys: 4, every: 250 * time.Millisecond, scoped: true},
	}
	if on[ClassKPL] {
		s.streams = append(s.streams, &soakStream{name: "soak-kpl", shards: 2, keys: 6, every: 250 * time.Millisecond, aggregation: true, scoped: true})
	}
	if on[ClassBudget] {
		s.streams = append(s.streams, soakBig(sc.Duration, on[ClassEFO]))
	}
	fmt.Fprintf(sc.Out, "soak: seed=%d duration=%v instances=%d classes=%s\n", sc.Seed, sc.Duration, sc.Instances, strings.Join(classes, ","))
	if err := s.setUp(ctx); err != nil {
		s.cleanup()
		s.closeRedisCuts()
		s.closeFailover()
		s.reportAborted(err)
		return Verdict{}, err
	}
	v, err := s.run(ctx)
	s.cleanup()
	s.closeRedisCuts()
	s.closeFailover()
	if err != nil {
		s.reportAborted(err)
		return Verdict{}, err
	}
	v.Leftover = s.leftovers()
	s.report(&v)
	return v, nil
}

// setUp starts the emulator, Redis (AOF on, the shipped ACL file), the
// fault proxy, and creates the streams.
func (s *soak) setUp(ctx context.Context) error {
	var err error
	if s.kin, err = testenv.StartKinesisMock(ctx); err != nil {
		return fmt.Errorf("starting kinesis-mock: %w", err)
	}
	s.kc = patientClient(s.kin)
	if s.promoter == promoterCluster {
		if err := s.setUpCluster(ctx); err != nil {
			return err
		}
	} else {
		if s.red, err = testenv.StartRedis(ctx, testenv.RedisOptions{AppendOnly: true, ShippedACL: true}); err != nil {
			return fmt.Errorf("starting redis-server: %w", err)
		}
		s.rc = s.red.Client()
		s.redisInputURL, s.redisTarget = s.red.URLAs(testenv.ACLInput), s.red.Addr
	}
	if s.failoverOn && s.promoter != promoterCluster {
		if err := s.setUpFailover(ctx); err != nil {
			return err
		}
		if s.promoter == promoterSentinel {
			s.redisInputURL = strings.Replace(s.redisInputURL, s.red.Addr, s.sentinel.Addr, 1)
			s.redisTarget = s.sentinel.Addr
		} else {
			s.redisInputURL = strings.Replace(s.redisInputURL, s.red.Addr, s.redisFront.Addr, 1)
			s.redisTarget = s.redisFront.Addr
		}
	}
	ck := checkpointer.DefaultConfig()
	ck.Group = group
	ck.LeasePeriod = s.plan.LeasePeriod
	base := checkpointer.NewFromClient(s.rc, ck, nil, nil)
	s.base = base
	for _, st := range s.streams {
		st.label = st.name
		arn, err := s.kin.CreateStream(ctx, st.name, st.shards)
		if err != nil {
			return fmt.Errorf("creating stream %s: %w", st.name, err)
		}
		st.store = base.Stream(arn)
	}
	if s.front, err = faultproxy.StartFront(s.kin.Endpoint, "127.0.0.1:0", s.sc.Seed); err != nil {
		return err
	}
	if s.on[ClassEFO] {
		// The runner's launch gives every instance the emulator's test CA
		// and its subscriptions without the initial response once there
		// is a cutter; the polling ones do not use them. Gentle: a cut or
		// a killed reader never resets kinesis-mock's end, which would
		// hold the shard's subscription for five minutes (its quirk,
		// covered by the input's own tests) and leave liveness judging
		// the emulator.
		if s.cutter, err = testenv.StartGentleTCPProxy(strings.TrimPrefix(s.kin.TLSEndpoint, "https://")); err != nil {
			return err
		}
	}
	if s.on[ClassStreams] {
		// One stream of the class from the start, in the group's first
		// listing.
		s.dynNames = 1
		return s.createDyn(ctx, dynPrefix+"1", false)
	}
	return nil
}

// note adds a line to the schedule as it ran.
func (s *soak) note(format string, args ...any) {
	now := time.Now()
	line := fmt.Sprintf("t=%-8v %s", now.Sub(s.start).Round(100*time.Millisecond), fmt.Sprintf(format, args...))
	s.smu.Lock()
	s.timeline = append(s.timeline, line)
	s.events = append(s.events, timedEvent{now, line})
	s.smu.Unlock()
	s.logf("soak: %s", line)
}

// faultBegin and faultEnd track the faults under way per scope (a stream's
// name, or "" for every stream), for liveness.
func (s *soak) faultBegin(scope string) {
	s.smu.Lock()
	s.active[scope]++
	s.smu.Unlock()
}

func (s *soak) faultEnd(scope string) {
	s.smu.Lock()
	s.active[scope]--
	s.quiet[scope] = time.Now()
	s.smu.Unlock()
}

// quietSince says when the faults on stream last ended (zero time if none
// yet) and whether one is under way.
func (s *soak) quietSince(stream string) (time.Time, bool) {
	s.smu.Lock()
	defer s.smu.Unlock()
	if s.active[""] > 0 || s.active[stream] > 0 {
		return time.Time{}, false
	}
	q := s.quiet[""]
	if s.quiet[stream].After(q) {
		q = s.quiet[stream]
	}
	return q, true
}

// leftovers lists the PIDs the soak started that are still alive.
func (s *soak) leftovers() []int {
	s.smu.Lock()
	defer s.smu.Unlock()
	var left []int
	for _, pid := range s.pids {
		if alive(pid) {
			left = append(left, pid)
		}
	}
	sort.Ints(left)
	return left
}
