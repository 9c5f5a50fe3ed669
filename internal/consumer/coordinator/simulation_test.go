package coordinator

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"maps"
	"os"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/aws/smithy-go"
	"pgregory.net/rapid"

	"github.com/connect-kinesis/connect-kinesis/internal/consumer"
	"github.com/connect-kinesis/connect-kinesis/internal/consumer/consumertest"
	"github.com/connect-kinesis/connect-kinesis/internal/kinesisx"
)

// The deterministic simulation of the consumer: several instances of the
// real Consumer (coordinators, readers, sources, the byte budget) read two
// streams of the in-memory Kinesis, one named and one found by discovery
// (simulation_streams_test.go), and share the in-memory stores, in the
// virtual time of testing/synctest, under a random schedule of composed
// faults: an instance killed, paused past its lease, stopped softly and
// started again; GetRecords throttled, denied, answering an expired
// iterator or ResourceNotFound for a while; splits and merges; an output
// that is slow, nacks, or is stuck; the found stream no longer found, or
// deleted and created again. rapid draws the whole schedule first
// (so a failure shrinks to its shortest schedule) and the schedule then
// runs in a synctest bubble, where time moves only when every goroutine
// waits, so a seed replays the same schedule at the same virtual times.
// It does not replay the same interleaving: goroutines runnable at one
// virtual instant run in the Go scheduler's order, a select picks at random
// among its ready cases, and map iteration order is random, so two runs of
// one seed can differ in what happens within an instant (which reader's
// fetch comes first, how many records a batch carries, how many are
// redelivered): the shrunk schedule is the same, the counts may not be, and
// a failure found may need a few replays of its seed to recur.
//
// Checked at every delivery: fencing (the deliverer holds the live lease
// the batch was read under: the shard's, or for a batch of a stream since
// deleted and created again, the deleted stream's lease as the re-create
// fenced it, within its term; a delivery of such a batch after its holder's
// renewal came back lost, still within that term, is not seen: the
// coordinator makes a store call before it marks the reader lost, so the
// harness cannot tell when the reader learned it), per-key order (every earlier record of the
// key, and every record of a parent shard, was delivered before), marks
// (a record delivered before is marked as a redelivery) and incarnations
// (nothing of a deleted stream after its successor's records). At every
// commit: the checkpoint never moves back and never passes a record no one
// delivered. After every step: the budget never holds more than its
// bound, and never holds room once no reader holds anything. After every
// soft stop: no lease of the instance left live, in any stream, a removal
// under way or not. At the end, with the faults lifted: every record
// delivered; after every instance stopped, no lease live past its bound,
// the budget drained and no goroutine left.

var (
	csimSchedules = flag.Int("sim.schedules", 0, "consumer simulation: schedules per run (0: the test's default)")
	csimSteps     = flag.Int("sim.steps", 0, "consumer simulation: most steps per schedule (0: the test's default)")
	csimDuration  = flag.Duration("sim.duration", 0, "consumer simulation: run batches of schedules for this long (make simulate)")
	csimSeed      = flag.Uint64("sim.seed", 0, "consumer simulation: the seed of the first batch (0: from the clock)")
)

const (
	// csimWallLimit is the real time one schedule may take; a schedule
	// takes milliseconds.
	csimWallLimit = time.Minute
	csimInstances = 3
	csimPeriod    = 600 * time.Millisecond
	// csimBudget is max_buffered_bytes: twice the room a shard asks for
	// before it knows its records' size (Kinesis' largest record while
	// reading), so that the third shard waits for room. The fake's records
	// all cost the same, so the bound is exact.
	csimBudget = 3 << 20
)

// csimStats counts what the schedules of one run did.
type csimStats struct {
	schedules, steps, deliveries, redeliveries, firstFailAt atomic.Int64
	faults                                                  sync.Map // kind -> *atomic.Int64

	// refused counts the batches Admit refused, refusedFirst those of them
	// on their first delivery (simulation_refuse_test.go).
	refused, refusedFirst atomic.Int64
	// alignedArmed counts the aligned wakes armed, alignedTaken the
	// batches a pipeline took at its leases' deadline instant, and
	// alignedRefused those Admit refused (simulation_aligned_test.go).
	alignedArmed, alignedTaken, alignedRefused atomic.Int64
	// found counts the deliveries of the found stream; removalStops the
	// soft stops that landed while a stream was being removed.
	found, removalStops atomic.Int64
}

func (s *csimStats) fault(kind string) {
	v, _ := s.faults.LoadOrStore(kind, new(atomic.Int64))
	v.(*atomic.Int64).Add(1)
}

func (s *csimStats) String() string {
	var parts []string
	for _, k := range csimKinds {
		if v, ok := s.faults.Load(k); ok {
			parts = append(parts, fmt.Sprintf("%s=%d", k, v.(*atomic.Int64).Load()))
		}
	}
	return fmt.Sprintf("schedules=%d steps=%d deliveries=%d (found stream %d) marked redeliveries=%d refused=%d (first deliveries %d); aligned wakes=%d (batches taken at the deadline %d, refused %d); steps by kind: %s; stops during a removal=%d; first failure at schedule %d",
		s.schedules.Load(), s.steps.Load(), s.deliveries.Load(), s.found.Load(), s.redeliveries.Load(), s.refused.Load(), s.refusedFirst.Load(), s.alignedArmed.Load(), s.alignedTaken.Load(), s.alignedRefused.Load(), strings.Join(parts, " "), s.removalStops.Load(), s.firstFailAt.Load())
}

// csimKinds are the schedule's step kinds; rapid favours (and shrinks
// towards) the first.
var csimKinds = []string{
	"advance", "produce", "output", "throttle", "expire", "kill", "pause", "stop", "start",
	"reshard", "denied", "notfound", "unlist", "recreate", "aligned",
}

// csimStep is one step of a schedule, drawn before it runs.
type csimStep struct {
	Kind   string
	Inst   int
	Stream int
	Shard  int
	N      int
	D      time.Duration
}

func (s csimStep) String() string {
	return fmt.Sprintf("%s inst=%d stream=%d shard=%d n=%d d=%v", s.Kind, s.Inst, s.Stream, s.Shard, s.N, s.D)
}

func drawSchedule(t *rapid.T, most int) []csimStep {
	n := rapid.IntRange(1, most).Draw(t, "steps")
	steps := make([]csimStep, n)
	for i := range steps {
		steps[i] = csimStep{
			Kind:   rapid.SampledFrom(csimKinds).Draw(t, "kind"),
			Inst:   rapid.IntRange(0, csimInstances-1).Draw(t, "instance"),
			Stream: rapid.IntRange(0, 1).Draw(t, "stream"),
			Shard:  rapid.IntRange(0, 7).Draw(t, "shard"),
			N:      rapid.IntRange(1, 12).Draw(t, "n"),
			D:      time.Duration(rapid.IntRange(1, 30).Draw(t, "tenths of a period")) * csimPeriod / 10,
		}
	}
	return steps
}

// csimOut is how an instance's output answers.
type csimOut int

const (
	outAck csimOut = iota
	outSlow
	outNack
	outStuck
	// outNames fails every other record of a batch by name
	// (Batch.AckRecords) and processes the rest.
	outNames
	// outReorder acks every other batch late, as outSlow does, and the
	// others at once, as a pipeline with several batches in flight acks
	// them out of order: a later batch of a shard is acked while an
	// earlier one is still in the pipeline.
	outReorder
	csimOutputs
)

// csim is one schedule's world.
type csim struct {
	stats *csimStats
	// api and store are the named stream's, "s"; acct is the account of
	// every stream, streams their state.
	api     *consumertest.Kinesis
	store   *consumertest.Store
	acct    *streamsAPI
	streams []*csimStream
	inst    [csimInstances]*csimInst
	gen     int
	// describes is the describe limiter the schedule's instances share,
	// as the inputs of one process do, made in the schedule's bubble:
	// the process's own (describePermits) runs on the real clock, and
	// one carried from an earlier schedule made a schedule's virtual
	// clock depend on the schedules before it (a failing seed did not
	// replay).
	describes *kinesisx.Pace

	mu sync.Mutex
	// marks is the redelivery mark per "<stream>/<shard>" (the
	// MarkingStore's).
	marks map[string]consumer.Position
	// delivered counts each record's deliveries, by
	// "<stream>.<incarnation>:<shard>/<i>" (csimKey); acked its acks.
	delivered, acked map[string]int
	// newestGen is the newest incarnation delivered per
	// "<stream>/<shard>".
	newestGen map[string]int
	keys      int
	failed    string
	log       []string
	// t0 is when the schedule began, in the bubble's time.
	t0 time.Time
}

func (s *csim) fail(format string, args ...any) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.failLocked(format, args...)
}

func (s *csim) failLocked(format string, args ...any) {
	if s.failed == "" {
		s.failed = fmt.Sprintf(format, args...)
	}
}

func (s *csim) logf(format string, args ...any) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.log = append(s.log, time.Now().UTC().Format("15:04:05.000 ")+fmt.Sprintf(format, args...))
}

// csimInst is one instance: a Consumer and its pipeline, and its view of
// the store and of Kinesis, which a pause holds and a kill ends.
type csimInst struct {
	sim   *csim
	idx   int
	id    string
	c     *Consumer
	state string // "", "running", "paused", "dead", "stopped"
	// wake is closed when the instance is not paused.
	wake chan struct{}
	dead atomic.Bool
	out  atomic.Int32
	// stuck is set once the output was stuck: batches it never answers
	// hold budget room until the instance stops.
	stuck atomic.Bool
	// slowed is set once the output was slow: a slow ack still waiting
	// when the instance stops is never given, and its batch holds room.
	slowed atomic.Bool
	// slowPending counts the slow acks not given yet.
	slowPending atomic.Int64
	// reorder counts the batches an outReorder output took: the odd
	// ones are acked late.
	reorder  atomic.Int64
	slow     atomic.Int64
	pipeStop context.CancelFunc
	pipeDone chan struct{}
	// poke, endFollow and followDone drive its discovery (follow).
	poke       chan struct{}
	endFollow  context.CancelFunc
	followDone chan struct{}
	// admitPause and interrupt arm a pause at admission (next in
	// simulation_refuse_test.go); interrupt under the simulation's lock.
	admitPause atomic.Int64
	interrupt  context.CancelFunc
	// deadline is the latest local deadline (Unix ns) the store gave the
	// instance's leases; storeHold, while not nil, holds its store calls
	// (under the simulation's lock), and busyUntil (Unix ns) keeps its
	// pipeline busy (an aligned wake, simulation_aligned_test.go).
	deadline  atomic.Int64
	storeHold chan struct{}
	busyUntil atomic.Int64
}

// getState and setState read and write state under the simulation's lock:
// a pause's wake-up writes it from a timer's goroutine.
func (i *csimInst) getState() string {
	i.sim.mu.Lock()
	defer i.sim.mu.Unlock()
	return i.state
}

func (i *csimInst) setState(st string) {
	i.sim.mu.Lock()
	defer i.sim.mu.Unlock()
	i.state = st
}

var errKilled = errors.New("the instance was killed")

// gate holds a call while the instance is paused and fails it once the
// instance is dead.
func (i *csimInst) gate(ctx context.Context) error {
	i.sim.mu.Lock()
	wake := i.wake
	i.sim.mu.Unlock()
	select {
	case <-wake:
	case <-ctx.Done():
		return ctx.Err()
	}
	if i.dead.Load() {
		return errKilled
	}
	return nil
}

func (s *csim) shardNum(n int) string { return fmt.Sprintf("shardId-%012d", n) }

func (s *csim) config(id string) consumer.Config {
	cfg := consumertest.Config()
	cfg.InstanceID = id
	cfg.LeasePeriod = csimPeriod
	cfg.MaxBufferedBytes = csimBudget
	cfg.ShardMaxInFlight = 2
	cfg.FollowStreams = true
	return cfg
}

// start starts instance k afresh, under a new id.
func (s *csim) start(ctx context.Context, k int) {
	s.gen++
	in := &csimInst{sim: s, idx: k, id: fmt.Sprintf("i%d.%d", k, s.gen), wake: make(chan struct{}), state: "running"}
	close(in.wake)
	stores := func(key string) consumer.Store {
		st := s.stream(key)
		return &csimStore{in: in, f: st.store, st: st}
	}
	c, err := New(s.config(in.id), &csimAccount{in: in, a: s.acct}, stores, nil, nil)
	if err != nil {
		s.fail("new consumer: %v", err)
		return
	}
	c.describes = s.describes
	if err := c.Start(ctx); err != nil {
		s.fail("starting %s: %v", in.id, err)
		return
	}
	in.c = c
	pctx, cancel := context.WithCancel(ctx)
	in.pipeStop, in.pipeDone = cancel, make(chan struct{})
	go in.pipeline(pctx)
	fctx, endFollow := context.WithCancel(ctx)
	in.poke, in.endFollow, in.followDone = make(chan struct{}, 1), endFollow, make(chan struct{})
	go in.follow(fctx)
	s.inst[k] = in
	s.logf("start %s", in.id)
}

// pipeline takes batches from the consumer and answers them as the
// instance's output does.
func (i *csimInst) pipeline(ctx context.Context) {
	defer close(i.pipeDone)
	for {
		if err := i.gate(ctx); err != nil {
			return
		}
		b, err := i.next(ctx)
		if err != nil {
			return
		}
		i.sim.onDelivery(i, b)
		out := csimOut(i.out.Load())
		if out == outReorder {
			out = outAck
			if i.reorder.Add(1)%2 == 1 {
				out = outSlow
			}
		}
		switch out {
		case outAck:
			i.sim.onAck(b)
			b.Ack(nil)
		case outSlow:
			i.slowPending.Add(1)
			go func() {
				defer i.slowPending.Add(-1)
				select {
				case <-time.After(time.Duration(i.slow.Load())):
					i.sim.onAck(b)
					b.Ack(nil)
				case <-ctx.Done():
				}
			}()
		case outNack:
			b.Ack(errors.New("the output refused the batch"))
		case outNames:
			errs := make([]error, len(b.Records))
			for k := range errs {
				if k%2 == 1 {
					errs[k] = fmt.Errorf("record %d refused by the output", k)
				}
			}
			i.sim.onAckRecords(b, errs)
			b.AckRecords(errs)
		case outStuck:
			// Never answered: the batch is in flight until the
			// instance stops.
		}
	}
}

func csimRecord(r consumer.Record) (shard string, n int) {
	shard, num, _ := strings.Cut(string(r.Data), "/")
	n, _ = strconv.Atoi(num)
	return shard, n
}

// onAck notes a batch's records processed, right before its ack.
func (s *csim) onAck(b *consumer.Batch) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, r := range b.Records {
		shard, n := csimRecord(r)
		s.acked[fmt.Sprintf("%s/%d", shard, n)]++
	}
}

// onAckRecords notes the records of a batch that errs names no failure
// for processed.
func (s *csim) onAckRecords(b *consumer.Batch, errs []error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for k, r := range b.Records {
		if errs[k] == nil {
			shard, n := csimRecord(r)
			s.acked[fmt.Sprintf("%s/%d", shard, n)]++
		}
	}
}

// onDelivery checks a batch as the pipeline receives it.
func (s *csim) onDelivery(in *csimInst, b *consumer.Batch) {
	st := s.stream(b.Stream)
	// The records name their incarnation; its Kinesis names the parents,
	// and the lease it was read under is its own. The store's lock is
	// taken before the simulation's, as a mark's write takes them.
	st.store.Mu.Lock()
	s.mu.Lock()
	gen := st.gen
	if len(b.Records) > 0 {
		key, _ := csimRecord(b.Records[0])
		num, _, _ := strings.Cut(strings.TrimPrefix(key, st.name+"."), ":")
		gen, _ = strconv.Atoi(num)
	}
	l, ok, state := s.readUnder(st, gen, b.Shard)
	s.mu.Unlock()
	st.store.Mu.Unlock()
	s.mu.Lock()
	defer s.mu.Unlock()
	if !ok || l.Owner != in.id || !time.Now().Before(l.ExpiresAt) {
		s.failLocked("fencing: %s delivered %d records of %s/%s (incarnation %d) under %s lease of %q (expires %v, now %v)", in.id, len(b.Records), b.Stream, b.Shard, gen, state, l.Owner, l.ExpiresAt.Sub(s.t0), time.Since(s.t0))
	}
	s.checkIncarnation(in, b)
	api := st.apis[gen]
	if api == nil {
		api = st.api
	}
	api.Mu.Lock()
	keys := s.keys
	parents := []string{}
	if sh := api.Shards[b.Shard]; sh != nil {
		for _, p := range []string{sh.Parent, sh.Adjacent} {
			if p != "" {
				parents = append(parents, p)
			}
		}
	}
	recs := map[string]int{}
	for _, p := range parents {
		if sh := api.Shards[p]; sh != nil {
			recs[p] = sh.Records
		}
	}
	api.Mu.Unlock()
	for _, p := range parents {
		for j := 1; j <= recs[p]; j++ {
			if s.acked[fmt.Sprintf("%s/%d", csimKey(st.name, gen, p), j)] == 0 {
				s.failLocked("order: %s delivered %s before record %d of its parent %s was processed", in.id, b.Shard, j, p)
			}
		}
	}
	for idx, r := range b.Records {
		shard, n := csimRecord(r)
		key := fmt.Sprintf("%s/%d", shard, n)
		for j := n - keys; j >= 1; j -= keys {
			if s.delivered[fmt.Sprintf("%s/%d", shard, j)] == 0 {
				s.failLocked("per-key order: %s delivered %s before %s/%d of the same key", in.id, key, shard, j)
			}
		}
		if s.delivered[key] > 0 {
			s.stats.redeliveries.Add(1)
			if !b.Redelivered(idx) {
				s.failLocked("marks: %s delivered %s again (delivery %d) unmarked", in.id, key, s.delivered[key]+1)
			}
		}
		s.delivered[key]++
		s.stats.deliveries.Add(1)
		if st.followed {
			s.stats.found.Add(1)
		}
	}
}

// csimStore is one instance's view of the shared store: its calls held
// while the instance is paused, failed once it is dead. It keeps
// redelivery marks, and checks every commit.
type csimStore struct {
	in *csimInst
	f  *consumertest.Store
	st *csimStream
}

var _ consumer.MarkingStore = (*csimStore)(nil)

func (s *csimStore) Acquire(ctx context.Context, shard, owner string) (consumer.Take, error) {
	if err := s.in.storeGate(ctx); err != nil {
		return consumer.Take{}, err
	}
	return s.take(ctx, shard, owner, "")
}

// take takes one shard from the shared store, with the redelivery mark
// the sim keeps and its lease's deadline noted; how names a batch in the
// log.
func (s *csimStore) take(ctx context.Context, shard, owner, how string) (consumer.Take, error) {
	t, err := s.f.Acquire(ctx, shard, owner)
	if err == nil {
		s.in.noteDeadline(t.Lease)
		s.in.sim.mu.Lock()
		t.Delivered = s.in.sim.marks[s.st.name+"/"+shard]
		s.in.sim.mu.Unlock()
		s.in.sim.logf("%s takes %s/%s token %d at %v%s", owner, s.st.name, shard, t.Token, t.Checkpoint, how)
	}
	return t, err
}

// AcquireMany is the batched take (consumer.TakesBatcher), one call held
// while the instance is paused or its store unreachable, as the Redis
// store's one script call is, so that the simulation runs the
// coordinator's batched path.
func (s *csimStore) AcquireMany(ctx context.Context, shards []string, owner string) []consumer.TakeResult {
	out := make([]consumer.TakeResult, len(shards))
	if err := s.in.storeGate(ctx); err != nil {
		for i := range out {
			out[i].Err = err
		}
		return out
	}
	how := fmt.Sprintf(" (batch of %d)", len(shards))
	for i, shard := range shards {
		t, err := s.take(ctx, shard, owner, how)
		out[i] = consumer.TakeResult{Take: t, Err: err}
	}
	return out
}

var _ consumer.TakesBatcher = (*csimStore)(nil)

func (s *csimStore) Join(ctx context.Context) (time.Duration, error) {
	if err := s.in.storeGate(ctx); err != nil {
		return 0, err
	}
	return s.f.Join(ctx)
}

func (s *csimStore) RenewAll(ctx context.Context, owner string, ls []consumer.Lease) ([]consumer.Lease, []string, error) {
	if err := s.in.storeGate(ctx); err != nil {
		return nil, nil, err
	}
	renewed, lost, err := s.f.RenewAll(ctx, owner, ls)
	s.in.noteDeadline(renewed...)
	return renewed, lost, err
}

func (s *csimStore) Release(ctx context.Context, l consumer.Lease) error {
	if err := s.in.storeGate(ctx); err != nil {
		return err
	}
	return s.f.Release(ctx, l)
}

// Commit checks, under the store's lock, that a commit that lands moves
// the checkpoint forwards and passes no record that no one delivered.
func (s *csimStore) Commit(ctx context.Context, l consumer.Lease, p consumer.Position) error {
	if err := s.in.storeGate(ctx); err != nil {
		return err
	}
	s.f.Mu.Lock()
	cur, had := s.f.Ckpt[l.Shard]
	owns := s.f.Owns(l)
	s.f.Mu.Unlock()
	if owns {
		sim := s.in.sim
		if had && p.Compare(cur) < 0 {
			sim.fail("checkpoint regression: %s committed %s at %v, below %v", l.Owner, l.Shard, p, cur)
		}
		n, _ := strconv.Atoi(p.Sequence)
		key := csimKey(s.st.name, n/csimGenSeq, l.Shard)
		sim.mu.Lock()
		for j := 1; j <= n%1000000; j++ {
			if sim.acked[fmt.Sprintf("%s/%d", key, j)] == 0 {
				sim.failLocked("skip: %s committed %s at %s, past record %d that no output processed", l.Owner, key, p.Sequence, j)
				break
			}
		}
		sim.mu.Unlock()
	}
	return s.f.Commit(ctx, l, p)
}

func (s *csimStore) CloseShard(ctx context.Context, l consumer.Lease) error {
	if err := s.in.storeGate(ctx); err != nil {
		return err
	}
	s.f.Mu.Lock()
	owns := s.f.Owns(l)
	s.f.Mu.Unlock()
	if owns {
		sim := s.in.sim
		gen, n, _ := sim.closedRecords(s.st, l.Shard)
		key := csimKey(s.st.name, gen, l.Shard)
		sim.mu.Lock()
		for j := 1; j <= n; j++ {
			if sim.acked[fmt.Sprintf("%s/%d", key, j)] == 0 {
				sim.failLocked("skip: %s closed %s past record %d that no output processed", l.Owner, key, j)
				break
			}
		}
		sim.mu.Unlock()
	}
	return s.f.CloseShard(ctx, l)
}

func (s *csimStore) Reseed(ctx context.Context, seed consumer.Seed) (consumer.Reseeded, error) {
	if err := s.in.storeGate(ctx); err != nil {
		return consumer.Reseeded{}, err
	}
	return s.f.Reseed(ctx, seed)
}

func (s *csimStore) StreamCreated(ctx context.Context, seen, current time.Time) (bool, error) {
	if err := s.in.storeGate(ctx); err != nil {
		return false, err
	}
	cleared, err := s.f.StreamCreated(ctx, seen, current)
	if cleared {
		s.in.sim.logf("%s cleared %s's state for the stream created at %v: its leases are fenced", s.in.id, s.st.name, current.Sub(s.in.sim.t0))
	}
	return cleared, err
}

func (s *csimStore) ClosedShards(ctx context.Context) (map[string]bool, error) {
	if err := s.in.storeGate(ctx); err != nil {
		return nil, err
	}
	return s.f.ClosedShards(ctx)
}

func (s *csimStore) Prune(ctx context.Context, shards []string) ([]string, error) {
	if err := s.in.storeGate(ctx); err != nil {
		return nil, err
	}
	return s.f.Prune(ctx, shards)
}

func (s *csimStore) Leases(ctx context.Context) (map[string]consumer.LeaseState, error) {
	if err := s.in.storeGate(ctx); err != nil {
		return nil, err
	}
	return s.f.Leases(ctx)
}

func (s *csimStore) Heartbeat(ctx context.Context, member string) error {
	if err := s.in.storeGate(ctx); err != nil {
		return err
	}
	return s.f.Heartbeat(ctx, member)
}

func (s *csimStore) LiveMembers(ctx context.Context) ([]string, error) {
	if err := s.in.storeGate(ctx); err != nil {
		return nil, err
	}
	return s.f.LiveMembers(ctx)
}

func (s *csimStore) RemoveMember(ctx context.Context, member string) error {
	if err := s.in.storeGate(ctx); err != nil {
		return err
	}
	return s.f.RemoveMember(ctx, member)
}

func (s *csimStore) RequestHandoff(ctx context.Context, shard, requester string) error {
	if err := s.in.storeGate(ctx); err != nil {
		return err
	}
	return s.f.RequestHandoff(ctx, shard, requester)
}

// RequestHandoffs is the batched request (consumer.HandoffRequestsBatcher),
// one call as the Redis store's.
func (s *csimStore) RequestHandoffs(ctx context.Context, shards []string, requester string) error {
	if err := s.in.storeGate(ctx); err != nil {
		return err
	}
	for _, shard := range shards {
		if err := s.f.RequestHandoff(ctx, shard, requester); err != nil {
			return err
		}
	}
	return nil
}

var _ consumer.HandoffRequestsBatcher = (*csimStore)(nil)

func (s *csimStore) HandoffRequests(ctx context.Context, owner string) (map[string]string, error) {
	if err := s.in.storeGate(ctx); err != nil {
		return nil, err
	}
	return s.f.HandoffRequests(ctx, owner)
}

func (s *csimStore) PublishProgress(ctx context.Context, owner string, ps map[string]consumer.Progress) error {
	if err := s.in.storeGate(ctx); err != nil {
		return err
	}
	return s.f.PublishProgress(ctx, owner, ps)
}

func (s *csimStore) ShardLoads(ctx context.Context) (map[string]consumer.ShardLoad, error) {
	if err := s.in.storeGate(ctx); err != nil {
		return nil, err
	}
	return s.f.ShardLoads(ctx)
}

func (s *csimStore) Marks(context.Context, string) consumer.Marker { return csimMarker{s} }

// csimMarker writes the redelivery mark at once, fenced by the lease.
type csimMarker struct{ s *csimStore }

// csimMarkDelay is how long a mark write takes: the MarkWriter writes the
// asks of an interval together, so a reader waits a while for its answer,
// and an instance killed meanwhile never stores the mark. A reader that
// hands records over before the answer then leaves them delivered and
// unmarked for the next owner, which the marks check sees.
const csimMarkDelay = csimPeriod / 3

// Ask writes the mark on a goroutine of its own, as the MarkWriter's call
// runs beside the reader: the answer comes csimMarkDelay later, once the
// instance is not paused.
func (m csimMarker) Ask(l consumer.Lease, p consumer.Position) <-chan error {
	ch := make(chan error, 1)
	go func() {
		time.Sleep(csimMarkDelay)
		ch <- m.write(l, p)
	}()
	return ch
}

func (m csimMarker) write(l consumer.Lease, p consumer.Position) error {
	if err := m.s.in.gate(context.Background()); err != nil {
		return err
	}
	f := m.s.f
	f.Mu.Lock()
	defer f.Mu.Unlock()
	if !f.Owns(l) || !time.Now().Before(f.LeaseMap[l.Shard].ExpiresAt) {
		return fmt.Errorf("raising the mark of shard %s: %w", l.Shard, consumer.ErrLeaseLost)
	}
	sim := m.s.in.sim
	sim.mu.Lock()
	defer sim.mu.Unlock()
	if key := m.s.st.name + "/" + l.Shard; p.Compare(sim.marks[key]) > 0 {
		sim.marks[key] = p
	}
	return nil
}

func (csimMarker) Forget(string) {}

// Found: the in-memory store wins no shard back at a re-seed whose reply
// is lost, so no write finds a mark above the take's.
func (csimMarker) Found(consumer.Lease) consumer.Position { return consumer.Position{} }

func (csimMarker) WriteBack(context.Context) error { return nil }

// stopInst stops an instance softly, as the input's stop does
// (plugins/input stop.go): its discovery is told to end, not waited for,
// and Close runs at once, then the discovery's end is awaited within the
// same deadline. Its pipeline answers on until then.
func (s *csim) stopInst(in *csimInst, within time.Duration) error {
	ctx, cancel := context.WithTimeout(context.Background(), within)
	defer cancel()
	in.endFollow()
	err := in.c.Close(ctx)
	select {
	case <-in.followDone:
	case <-ctx.Done():
	}
	in.pipeStop()
	<-in.pipeDone
	in.setState("stopped")
	return err
}

// killInst ends an instance without a word to the store: every call fails
// from now on, its pipeline stops answering.
func (s *csim) killInst(in *csimInst) {
	in.dead.Store(true)
	s.endHold(in, nil)
	s.wakeInst(in)
	in.endFollow()
	in.pipeStop()
	<-in.pipeDone
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	_ = in.c.Close(ctx)
	in.setState("dead")
}

func (s *csim) wakeInst(in *csimInst) {
	s.mu.Lock()
	defer s.mu.Unlock()
	select {
	case <-in.wake:
	default:
		close(in.wake)
	}
	if in.state == "paused" {
		in.state = "running"
	}
}

// live reports whether a lease is held now.
func csimLive(l consumer.Lease) bool { return l.Owner != "" && time.Now().Before(l.ExpiresAt) }

// step runs one step of the schedule.
func (s *csim) step(ctx context.Context, st csimStep) {
	s.stats.steps.Add(1)
	s.stats.fault(st.Kind)
	in := s.inst[st.Inst]
	running := in != nil && (in.getState() == "running" || in.getState() == "paused")
	strm := s.streams[st.Stream%len(s.streams)]
	_, api := s.current(strm)
	open := strm.openShards()
	shard := ""
	if len(open) > 0 {
		shard = open[st.Shard%len(open)]
	}
	anyShard := strm.shards[st.Shard%len(strm.shards)]
	s.logf("step: %v", st)
	switch st.Kind {
	case "advance":
		time.Sleep(st.D)
	case "produce":
		if shard != "" {
			api.Mu.Lock()
			api.Shards[shard].Records += st.N
			api.Mu.Unlock()
		}
	case "output":
		if running {
			in.out.Store(int32(st.N % int(csimOutputs)))
			if csimOut(st.N%int(csimOutputs)) == outStuck {
				in.stuck.Store(true)
			}
			if o := csimOut(st.N % int(csimOutputs)); o == outSlow || o == outReorder {
				in.slowed.Store(true)
			}
			in.slow.Store(int64(st.D))
		}
	case "throttle":
		api.Mu.Lock()
		api.Throttle[anyShard] += st.N
		api.Mu.Unlock()
	case "expire":
		api.Mu.Lock()
		api.ExpireAt[anyShard] = len(api.Calls[anyShard]) + 1 + st.N%3
		api.Mu.Unlock()
	case "denied", "notfound":
		code, msg := "AccessDeniedException", "User is not authorized to perform: kinesis:GetRecords"
		if st.Kind == "notfound" {
			code, msg = kinesisx.CodeResourceNotFound, "Shard "+anyShard+" in stream s under account 000000000000 does not exist"
		}
		api.Mu.Lock()
		api.GetErrors[anyShard] = &smithy.GenericAPIError{Code: code, Message: msg}
		api.Mu.Unlock()
		time.AfterFunc(st.D, func() {
			api.Mu.Lock()
			delete(api.GetErrors, anyShard)
			api.Mu.Unlock()
		})
	case "kill":
		if running {
			s.killInst(in)
		}
	case "pause":
		if in != nil && in.getState() == "running" {
			// Past the lease: 1.1 to 4 periods; every other one lands
			// between the pipeline's receive and Admit.
			d := csimPeriod + csimPeriod/10 + st.D
			if st.N%2 == 0 {
				s.armAdmitPause(in, d)
			} else {
				s.pauseInst(in, d)
			}
		}
	case "aligned":
		if in != nil && in.getState() == "running" {
			s.stats.alignedArmed.Add(1)
			s.armAligned(in, csimPeriod/10+st.D)
		}
	case "stop":
		s.softStop(in)
	case "start":
		if !running {
			s.start(ctx, st.Inst)
		}
	case "unlist", "recreate":
		if !strm.followed {
			break
		}
		// One time in four, the instance's output is stuck (the case a
		// soft stop exists for) with records of every stream in flight
		// when the stream goes.
		if st.N%4 == 0 && in != nil && in.getState() == "running" {
			s.stuckInFlight(in, strm, st)
		}
		if st.Kind == "unlist" {
			s.unlist(strm)
		} else {
			s.recreate(strm)
		}
		// Every other time, the instance is stopped while the stream's
		// removal waits for its in-flight batches.
		if st.N%2 == 0 {
			synctest.Wait()
			s.softStop(in)
		}
	case "reshard":
		if shard == "" {
			break
		}
		api.Mu.Lock()
		api.Shards[shard].Closed = true
		api.Mu.Unlock()
		strm.open[shard] = false
		if st.N%2 == 0 && len(open) > 1 {
			other := open[(st.Shard+1)%len(open)]
			api.Mu.Lock()
			api.Shards[other].Closed = true
			api.Mu.Unlock()
			strm.open[other] = false
			s.logf("merge %s and %s into %s", shard, other, s.newShard(strm, shard, other))
		} else {
			a, b := s.newShard(strm, shard, ""), s.newShard(strm, shard, "")
			s.logf("split %s into %s and %s", shard, a, b)
		}
	}
	s.checkBudgets()
}

// softStop stops a running instance softly and checks what it left.
func (s *csim) softStop(in *csimInst) {
	if in == nil || in.getState() != "running" {
		return
	}
	stuck := in.stuck.Load()
	s.endHold(in, nil)
	removing := csimRemoving(in.c)
	if len(removing) > 0 {
		s.stats.removalStops.Add(1)
		s.logf("stop %s while removing %v", in.id, removing)
	}
	err := s.stopInst(in, 3*csimPeriod)
	s.releasedAll(in, removing)
	if err == nil && !stuck {
		// A soft stop in time with its output answering leaves no
		// room held: a reader that ended on a refused batch must
		// have given its charge back.
		if err := in.c.budget.Drained(); err != nil && !in.slowed.Load() {
			s.fail("budget of %s after its stop: %v", in.id, err)
		}
	}
}

// checkBudgets: no budget holds more than its bound, nor room nobody holds.
func (s *csim) checkBudgets() {
	bound := int64(csimBudget)
	for _, in := range s.inst {
		if in == nil || in.c == nil || in.c.budget == nil {
			continue
		}
		b := in.c.budget
		if p := b.PeakHeld(); p > bound {
			s.fail("budget: %s's budget held %d bytes, above its bound %d", in.id, p, bound)
		}
		if l := b.Leaked(); l != 0 {
			s.fail("budget: %s's budget held %d bytes once no reader held anything", in.id, l)
		}
	}
}

// run plays a schedule in the bubble and returns the first failure.
func (s *csim) run(ctx context.Context, steps []csimStep) string {
	// A schedule that fails midway ends its instances, so that the bubble
	// ends and the failure is reported (and shrunk).
	defer func() {
		for _, in := range s.inst {
			if in != nil && in.c != nil && (in.getState() == "running" || in.getState() == "paused") {
				s.killInst(in)
			}
		}
	}()
	// The named stream has two shards, the found one a single shard: a
	// second costs throughput and adds no fault of its own.
	named, found := s.addStream("s", false), s.addStream("f", true)
	s.newShard(named, "", "")
	s.newShard(named, "", "")
	s.newShard(found, "", "")
	s.start(ctx, 0)
	s.start(ctx, 1)
	for _, st := range steps {
		s.step(ctx, st)
		synctest.Wait()
		if s.failed != "" {
			return s.failed
		}
	}
	// The faults lift: every instance wakes, outputs ack, Kinesis answers.
	s.logf("faults lift")
	total := map[string]int{}
	for _, st := range s.streams {
		gen, api := s.current(st)
		api.Mu.Lock()
		clear(api.GetErrors)
		clear(api.Throttle)
		clear(api.ExpireAt)
		for id, sh := range api.Shards {
			total[csimKey(st.name, gen, id)] = sh.Records
		}
		api.Mu.Unlock()
		if st.followed && !st.listed {
			s.unlist(st)
		}
	}
	anyRunning := false
	for _, in := range s.inst {
		if in == nil || in.getState() == "dead" || in.getState() == "stopped" {
			continue
		}
		in.admitPause.Store(0)
		in.busyUntil.Store(0)
		s.endHold(in, nil)
		s.wakeInst(in)
		anyRunning = true
	}
	if !anyRunning {
		s.start(ctx, 0)
	}
	// Stuck batches stay stuck until their instance stops: a reader waits
	// for them, so a stuck instance is stopped and started again.
	for k, in := range s.inst {
		if in == nil || in.getState() != "running" {
			continue
		}
		if in.stuck.Load() {
			_ = s.stopInst(in, time.Second)
			s.start(ctx, k)
			continue
		}
		in.out.Store(int32(outAck))
	}
	missing := ""
	for range 300 {
		time.Sleep(time.Second)
		missing = s.undelivered(total)
		if missing == "" {
			break
		}
	}
	if missing != "" && s.failed == "" {
		s.fail("delivery: %s never processed with every fault lifted (after 300s)", missing)
	}
	// A slow ack still to come is waited for: its batch may be of a
	// deleted incarnation, whose records the wait above does not count,
	// and a stop would drop the ack, leaving its room held for good.
	for _, in := range s.inst {
		for k := 0; in != nil && in.slowPending.Load() > 0 && k < 10; k++ {
			time.Sleep(csimPeriod)
		}
	}
	for _, in := range s.inst {
		if in != nil && (in.getState() == "running" || in.getState() == "paused") {
			_ = s.stopInst(in, 3*csimPeriod)
			s.releasedAll(in, nil)
			if err := in.c.budget.Drained(); err != nil {
				s.fail("budget of %s after its stop: %v", in.id, err)
			}
		}
	}
	// Every lease lapsed within its bound after the stops.
	time.Sleep(csimPeriod)
	for _, st := range s.streams {
		st.store.Mu.Lock()
		for shard, l := range st.store.LeaseMap {
			if csimLive(l) {
				s.fail("leases: %s's lease of %s/%s still live a lease period after every instance stopped", l.Owner, st.name, shard)
			}
		}
		st.store.Mu.Unlock()
	}
	time.Sleep(10 * time.Second)
	synctest.Wait()
	if left := bubbleGoroutines(); left != "" {
		s.fail("goroutines left after every consumer closed:\n%s", left)
	}
	s.checkBudgets()
	return s.failed
}

// bubbleGoroutines returns the stacks of the goroutines of the caller's
// synctest bubble other than the caller: runtime.NumGoroutine counts the
// whole process's.
func bubbleGoroutines() string {
	own := make([]byte, 1<<12)
	own = own[:runtime.Stack(own, false)]
	header, _, _ := strings.Cut(string(own), "\n")
	_, bubble, ok := strings.Cut(header, "synctest bubble ")
	if !ok {
		return ""
	}
	tag := "synctest bubble " + bubble
	// The buffer grows until the dump fits: a 4 MiB buffer made for
	// every schedule cost an eighth of the simulation's time.
	all := make([]byte, 1<<16)
	for {
		n := runtime.Stack(all, true)
		if n < len(all) {
			all = all[:n]
			break
		}
		all = make([]byte, 2*len(all))
	}
	var left []string
	for _, g := range strings.Split(string(all), "\n\n") {
		first, _, _ := strings.Cut(g, "\n")
		// The bubble's own: synctest.Test's goroutines.
		if strings.Contains(g, "internal/synctest.Run(") || strings.Contains(g, "testingSynctestTest(") {
			continue
		}
		if strings.Contains(first, tag) && first != header {
			left = append(left, g)
		}
	}
	return strings.Join(left, "\n\n")
}

// undelivered names the first record of total that no output processed.
func (s *csim) undelivered(total map[string]int) string {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, key := range slices.Sorted(maps.Keys(total)) {
		for j := 1; j <= total[key]; j++ {
			if s.acked[fmt.Sprintf("%s/%d", key, j)] == 0 {
				return fmt.Sprintf("%s/%d", key, j)
			}
		}
	}
	return ""
}

// csimRunSchedule plays one schedule in a bubble of its own and returns
// its first failure and its log.
func csimRunSchedule(t *testing.T, stats *csimStats, sched []csimStep, keys int) (failed string, log []string) {
	csimBubble(t, func(st *testing.T) string {
		s := &csim{stats: stats, api: consumertest.NewKinesis(), store: consumertest.NewStore(csimPeriod), describes: kinesisx.NewPace(kinesisx.MaxDescribeStreamSummaryPerSecond),
			marks: map[string]consumer.Position{}, delivered: map[string]int{}, acked: map[string]int{}, newestGen: map[string]int{}, keys: keys, t0: time.Now()}
		failed = s.run(st.Context(), sched)
		log = s.log
		return failed
	}, &failed)
	return failed, log
}

// csimBubble runs body in a synctest bubble and leaves its failure in
// failed. A goroutine the schedule leaves blocked for good (the end's
// "goroutines left" check names it) makes synctest panic once body
// returns, as a deadlock of the bubble: the panic is turned into the
// schedule's failure, so that it is reported with its schedule, its
// goroutines and its log, and shrunk, rather than as a bare panic. The
// blocked goroutines stay blocked.
func csimBubble(t *testing.T, body func(*testing.T) string, failed *string) {
	defer func() {
		r := recover()
		if r == nil {
			return
		}
		if *failed == "" {
			*failed = fmt.Sprintf("the bubble ended deadlocked: %v", r)
		} else {
			*failed += fmt.Sprintf("\n(and the bubble ended deadlocked: %v)", r)
		}
	}()
	synctest.Test(t, func(st *testing.T) { *failed = body(st) })
}

// runConsumerSimulation runs checks schedules of at most steps steps each
// from seed.
func runConsumerSimulation(t *testing.T, stats *csimStats, checks, steps int, seed uint64) {
	t.Helper()
	for name, v := range map[string]string{"rapid.checks": strconv.Itoa(checks), "rapid.seed": strconv.FormatUint(seed, 10)} {
		if err := flag.Set(name, v); err != nil {
			t.Fatal(err)
		}
	}
	rapid.Check(t, func(rt *rapid.T) {
		stats.schedules.Add(1)
		sched := drawSchedule(rt, steps)
		keys := rapid.IntRange(1, 4).Draw(rt, "keys")
		// A livelock in virtual time (goroutines that keep running within
		// one instant, so time never advances) would hang the run with no
		// word of its schedule: past csimWallLimit of real time, the
		// schedule and its replay are printed and the run ends.
		n := stats.schedules.Load()
		watchdog := time.AfterFunc(csimWallLimit, func() {
			lines := make([]string, len(sched))
			for i, st := range sched {
				lines[i] = st.String()
			}
			fmt.Fprintf(os.Stderr, "consumer simulation: schedule %d did not end within %v of real time (virtual time stopped advancing: a livelock)\nschedule (keys=%d):\n  %s\nreplay: make simulate LAYER=consumer SEED=%d SCHEDULES=%d STEPS=%d\n",
				n, csimWallLimit, keys, strings.Join(lines, "\n  "), seed, checks, steps)
			panic("consumer simulation: a schedule livelocked")
		})
		defer watchdog.Stop()
		failed, log := csimRunSchedule(t, stats, sched, keys)
		if failed != "" {
			stats.firstFailAt.CompareAndSwap(0, stats.schedules.Load())
			lines := make([]string, len(sched))
			for i, st := range sched {
				lines[i] = st.String()
			}
			tail := log[max(0, len(log)-60):]
			rt.Fatalf("%s\nschedule (keys=%d):\n  %s\nlast events:\n  %s", failed, keys, strings.Join(lines, "\n  "), strings.Join(tail, "\n  "))
		}
	})
}

// TestSimulateConsumer is the CI slice of the consumer simulation: the
// real Consumer, several instances, random composed fault schedules in
// virtual time. `make simulate` runs it long (-sim.duration, -sim.seed).
func TestSimulateConsumer(t *testing.T) {
	stats := &csimStats{}
	checks, steps := csimDefaultSchedules, 24
	if *csimDuration > 0 {
		checks = 100
	}
	if *csimSchedules > 0 {
		checks = *csimSchedules
	}
	if *csimSteps > 0 {
		steps = *csimSteps
	}
	seed := *csimSeed
	switch {
	case seed == 0 && *csimSchedules == 0 && *csimDuration == 0:
		seed = 1
	case seed == 0:
		seed = uint64(time.Now().UnixNano())
	}
	start := time.Now()
	batches := 0
	defer func() {
		el := time.Since(start)
		if t.Failed() {
			t.Logf("replay: make simulate LAYER=consumer SEED=%d SCHEDULES=%d STEPS=%d", seed+uint64(batches), checks, steps)
		}
		t.Logf("consumer simulation: seed=%d batches=%d %s; %.1f schedules/s (%v)", seed, batches, stats, float64(stats.schedules.Load())/el.Seconds(), el.Round(time.Millisecond))
	}()
	for {
		runConsumerSimulation(t, stats, checks, steps, seed+uint64(batches))
		batches++
		if *csimDuration == 0 || time.Since(start) >= *csimDuration {
			break
		}
	}
	checkRefusalsLive(t, stats)
	checkAlignedLive(t, stats)
}
