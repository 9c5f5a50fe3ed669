package chaos

import (
	"context"
	"fmt"
	"maps"
	"strings"
	"sync"
	"syscall"
	"time"
)

// run starts the instances and producers, runs the drawn schedule during
// the load while the monitor checks the invariants, lets the instances
// drain, and checks the whole run.
func (s *soak) run(ctx context.Context) (Verdict, error) {
	evs := drawSchedule(s.sc.Seed, s.sc.Duration, s.sc.Instances, s.on, s.plan.LeasePeriod)
	s.start = time.Now()
	s.note("schedule drawn from seed %d: %d faults", s.sc.Seed, len(evs))
	for _, name := range s.baseNames() {
		if err := s.startInstance(name); err != nil {
			return Verdict{}, err
		}
	}
	s.applyFront()
	if s.cutter != nil {
		cfg, err := s.kin.TLSConfig()
		if err != nil {
			return Verdict{}, err
		}
		cfg.NextProtos = []string{"h2"} // as the fan-out readers ask
		s.stalledFor = s.emulatorStalledFor
		emuCtx, stopWatch := context.WithCancel(ctx)
		watched := make(chan struct{})
		go func() {
			defer close(watched)
			s.watchEmulator(emuCtx, tlsProbe(strings.TrimPrefix(s.kin.TLSEndpoint, "https://"), cfg), emuProbeEvery, emuProbeTimeout, emuGoneAfter)
		}()
		defer func() { stopWatch(); <-watched }()
	}
	exitCtx, stopExitWatch := context.WithCancel(ctx)
	exitWatched := make(chan struct{})
	go func() {
		defer close(exitWatched)
		p := s.kin.Process()
		s.watchExit(exitCtx, p.Done(), p.Err)
	}()
	defer func() { stopExitWatch(); <-exitWatched }()
	mon := newMonitor(s)
	producers, err := s.startProducers()
	if err != nil {
		return Verdict{}, err
	}
	s.note("load: %s, for %v", loadLine(s.streams), s.sc.Duration)

	sched := carryOut(ctx, s.start, evs, s.do)
	// On an early return the schedule stops before cleanup tears down what
	// it acts on.
	defer sched.stop()
	errs := sched.errs

	loadEnd := s.start.Add(s.sc.Duration)
	for {
		if err := s.pause(ctx, tick); err != nil {
			return Verdict{}, err
		}
		if err := mon.check(ctx, false); err != nil {
			return Verdict{}, s.blameEmulator(err)
		}
		if err := s.emulatorGone(); err != nil {
			return Verdict{}, err
		}
		select {
		case err := <-errs:
			return Verdict{}, s.blameEmulator(err)
		default:
		}
		if !time.Now().Before(loadEnd) {
			break
		}
		if done, err := producersDone(producers); err != nil || done {
			return Verdict{}, s.blameEmulator(fmt.Errorf("a producer ended before the load did (see producer-*.log in %s): %v", s.cfg.Dir, err))
		}
		if label, err := s.dynProducerEnded(); label != "" {
			return Verdict{}, s.blameEmulator(fmt.Errorf("the producer of %s ended before the load did (see producer-*.log in %s): %v", label, s.cfg.Dir, err))
		}
	}
	s.smu.Lock()
	s.loadOver = true
	s.smu.Unlock()
	stopProducers(producers)
	s.stopDynProducers()
	// The faults still under way end; the monitor goes on checking (a
	// deletion of the streams class waits for its judgement).
	scheduled := make(chan struct{})
	go func() { sched.wg.Wait(); close(scheduled) }()
	for waiting := true; waiting; {
		select {
		case <-scheduled:
			waiting = false
		case <-time.After(tick):
			if err := mon.check(ctx, false); err != nil {
				return Verdict{}, s.blameEmulator(err)
			}
			if err := s.emulatorGone(); err != nil {
				return Verdict{}, err
			}
		}
	}
	close(errs)
	if err := <-errs; err != nil {
		return Verdict{}, s.blameEmulator(err)
	}
	// A creation under way when the load ended started its producer
	// after the stop above.
	s.stopDynProducers()
	s.note("load done; faults off (the kinesis class's rates stay); draining")
	for _, name := range extraNames {
		s.stopInstance(name, syscall.SIGTERM)
	}
	for _, name := range s.baseNames() {
		if s.live(name) == nil {
			if err := s.startInstance(name); err != nil {
				return Verdict{}, err
			}
		}
	}
	// Every record delivered, or the drain's bound passed; a shard still
	// read again from its start after a wipe is waited for while it
	// moves, up to drainMax (soak_front.go).
	drainStart := time.Now()
	stalled0 := s.drainStalled(0)
	noted := false
	for {
		if err := s.pause(ctx, tick); err != nil {
			return Verdict{}, err
		}
		if err := mon.check(ctx, false); err != nil {
			return Verdict{}, s.blameEmulator(err)
		}
		if err := s.emulatorGone(); err != nil {
			return Verdict{}, err
		}
		if mon.caughtUp() {
			break
		}
		now := time.Now()
		if drainOpen(now.Sub(drainStart), s.drainStalled(stalled0)) {
			continue
		}
		if now.Sub(drainStart) > drainMax || !mon.draining(now) {
			break
		}
		if !noted {
			s.note("drain: a shard still being read again from its start moves; waiting while it does (at most %v)", drainMax)
			noted = true
		}
	}
	s.stopAll()
	if err := mon.check(ctx, true); err != nil {
		return Verdict{}, err
	}
	s.note("instances stopped")
	stream, err := mon.sh.all(ctx, mon.streamRefs())
	if err != nil {
		return Verdict{}, err
	}
	counter := producedCounters(stream)
	s.mu.Lock()
	windows, kills := append([]Window(nil), s.windows...), append([]Kill(nil), s.kills...)
	nackers := maps.Clone(s.nackers)
	fanOut, incarnations := 0, len(s.fanOut)
	for _, efo := range s.fanOut {
		if efo {
			fanOut++
		}
	}
	s.mu.Unlock()
	v := mon.v
	v.FenceJudged = mon.fence.judged
	for _, ss := range mon.sh.shards {
		v.Strays += ss.strays
	}
	v.Table = Check(counter, stream, append(append([]Delivery(nil), mon.all...), mon.handovers...), append(windows, mon.explained...), kills, nackers)
	v.Table.NoVerdict = true
	v.Table.FanOut, v.Table.Incarnations = fanOut, incarnations
	if v.Table.ACLRefusals, err = s.aclRefusals(ctx); err != nil {
		return Verdict{}, err
	}
	v.Table.Injected = s.injected()
	return v, nil
}

// pause waits d unless ctx ends first.
func (s *soak) pause(ctx context.Context, d time.Duration) error {
	select {
	case <-time.After(d):
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// caughtUp says whether every record the shadow read was delivered.
func (m *monitor) caughtUp() bool {
	gone := m.goneLabels()
	for _, ss := range m.sh.shards {
		if label, _, _ := strings.Cut(ss.id, "/"); gone[label] {
			continue // what is left of it is lost: reported when it was deleted
		}
		for i := ss.next; i < len(ss.recs); i++ {
			if !m.done(ss.id, ss.recs[i].Seq) {
				return false
			}
		}
	}
	return len(m.pending) == 0
}

// producersDone says whether a producer ended, and with what error.
func producersDone(ps []*child) (bool, error) {
	for _, p := range ps {
		select {
		case <-p.done:
			return true, p.err
		default:
		}
	}
	return false, nil
}

// drainBound is how long the drain waits for every record to be delivered
// before it judges what is missing, not counting the time the emulator
// stalled meanwhile (drainOpen).
const drainBound = 2*livenessBound + time.Minute

// drainOpen says the drain still waits, waited into it, stalled of it with
// the emulator stalled: an emulator that answers nothing cannot be read
// from. Seed 10 with efo (30 minutes) judged 11,433 records lost at the
// end of a 2-minute drain that kinesis-mock spent wholly inside a stall of
// 16 min 32 s, which ended 2.4 s after the instances were stopped. The
// wait never passes drainMax.
func drainOpen(waited, stalled time.Duration) bool {
	return waited < min(drainBound+stalled, drainMax)
}

// drainStalled is how long the emulator stalled since the probe's count
// was since (0 without the probe, which only the efo class runs).
func (s *soak) drainStalled(since time.Duration) time.Duration {
	if s.stalledFor == nil {
		return 0
	}
	return s.stalledFor() - since
}

// schedule is a drawn schedule being carried out.
type schedule struct {
	cancel context.CancelFunc
	wg     sync.WaitGroup
	// errs holds the events' failures, the first one first; it has room
	// for one per event.
	errs chan error
}

// carryOut carries out evs, each at its time after start in a goroutine
// of its own, until ctx ends or an event fails. The first failure ends the
// schedule at once: the events under way see their context end and the
// later ones are not carried out, since they would act on a run that is
// over (seed 14 with efo: 16 operations of the streams class ran in the
// 33 s between a failed deletion and the end of the run). A failure names
// the time its event was drawn for and the time it failed.
func carryOut(ctx context.Context, start time.Time, evs []soakEvent, do func(context.Context, soakEvent) error) *schedule {
	ctx, cancel := context.WithCancel(ctx)
	sc := &schedule{cancel: cancel, errs: make(chan error, len(evs)+1)}
	sc.wg.Add(1)
	go func() {
		defer sc.wg.Done()
		for _, e := range evs {
			select {
			case <-time.After(time.Until(start.Add(e.at))):
			case <-ctx.Done():
				return
			}
			sc.wg.Add(1)
			go func() {
				defer sc.wg.Done()
				if err := do(ctx, e); err != nil {
					sc.errs <- fmt.Errorf("%s drawn for t=%v, failed at t=%v: %w", e.class, e.at.Round(100*time.Millisecond), time.Since(start).Round(100*time.Millisecond), err)
					cancel()
				}
			}()
		}
	}()
	return sc
}

// stop ends the events under way and waits for them.
func (sc *schedule) stop() {
	sc.cancel()
	sc.wg.Wait()
}

// loadLine names each stream of the load with its keys and pace, and the
// size of its records where they are padded.
func loadLine(streams []*soakStream) string {
	var parts []string
	for _, st := range streams {
		p := fmt.Sprintf("%s (%d keys, one record per key every %v", st.name, st.keys, st.every)
		if st.aggregation {
			p += ", KPL aggregates"
		}
		if st.padKiB > 0 {
			p += fmt.Sprintf(", %d KiB records", st.padKiB)
		}
		parts = append(parts, p+")")
	}
	return strings.Join(parts, ", ")
}
