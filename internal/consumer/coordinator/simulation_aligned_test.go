package coordinator

import (
	"context"
	"testing"
	"time"

	"github.com/connect-kinesis/connect-kinesis/internal/consumer"
)

// An aligned wake: Redis becomes unreachable from an instance (every store
// call of it hangs, so no renewal extends its leases) while its output is
// busy, and the output finishes at the very instant its leases' local
// deadline passes. At that instant two goroutines are due: the pipeline,
// which asks Consumer.Next for the next batch, and each reader blocked in
// its hand-over, whose deadline timer fires. In a real process either may
// run first, and a pipeline that wins takes a batch whose reader has not
// yet counted it as handed over, and Admit refuses it (the lease's
// deadline passed): the order a refused first delivery's give-back must
// survive. In the virtual time of testing/synctest the bubble fires every
// timer due at an instant before any goroutine it woke runs, so the
// reader's timer decides its select first, unless the pipeline, readied
// earlier in the same pass, runs on another core before the pass reaches
// the reader's timer. That is luck, not the seed: alignedRefused counts
// those wins, they are rare, and a failure they cause seldom replays.

// noteDeadline records the local deadline of leases the store gave in.
func (i *csimInst) noteDeadline(ls ...consumer.Lease) {
	for _, l := range ls {
		if d := l.Deadline.UnixNano(); !l.Deadline.IsZero() && d > i.deadline.Load() {
			i.deadline.Store(d)
		}
	}
}

// storeGate holds a store call while the instance is paused or its store
// unreachable, and fails it once the instance is dead.
func (i *csimInst) storeGate(ctx context.Context) error {
	i.sim.mu.Lock()
	hold := i.storeHold
	i.sim.mu.Unlock()
	if hold != nil {
		select {
		case <-hold:
		case <-ctx.Done():
			return ctx.Err()
		}
	}
	return i.gate(ctx)
}

// armAligned makes in's store unreachable until past its leases' local
// deadline (by d) and its output busy until that deadline, and wakes a
// pipeline waiting in Consumer.Next so that it is busy from now.
func (s *csim) armAligned(in *csimInst, d time.Duration) {
	at := time.Unix(0, in.deadline.Load())
	if !time.Now().Before(at) {
		s.logf("no aligned wake for %s: its leases' deadline %s has passed", in.id, at.UTC().Format("15:04:05.000"))
		return
	}
	hold := make(chan struct{})
	s.mu.Lock()
	if in.storeHold != nil {
		s.mu.Unlock()
		return
	}
	in.storeHold = hold
	in.busyUntil.Store(at.UnixNano())
	if in.interrupt != nil {
		in.interrupt()
	}
	s.log = append(s.log, time.Now().UTC().Format("15:04:05.000 ")+"store of "+in.id+" unreachable until "+at.Add(d).UTC().Format("15:04:05.000")+", its output busy until its leases' deadline "+at.UTC().Format("15:04:05.000"))
	s.mu.Unlock()
	time.AfterFunc(time.Until(at)+d, func() { s.endHold(in, hold) })
}

// endHold makes in's store reachable again, if hold (or, when nil, any
// hold) still holds it: once the hold's time is up, and when the instance
// is stopped or killed, so that a stop's releases are not held.
func (s *csim) endHold(in *csimInst, hold chan struct{}) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if in.storeHold != nil && (hold == nil || in.storeHold == hold) {
		close(in.storeHold)
		in.storeHold = nil
	}
}

// nextAligned is Consumer.Next for a pipeline busy until at: it takes the
// next batch from the consumer's channel once at comes, and admits it as
// Next does, counting a batch taken at that instant and a refusal of it.
func (i *csimInst) nextAligned(ctx context.Context, at time.Time) (*consumer.Batch, bool, error) {
	select {
	case <-time.After(time.Until(at)):
	case <-ctx.Done():
		return nil, false, ctx.Err()
	}
	var b *consumer.Batch
	select {
	case b = <-i.c.Batches():
	case <-ctx.Done():
		return nil, false, ctx.Err()
	}
	now := time.Now()
	first, n, shard := b.Attempts == nil, len(b.Records), b.Shard
	if b.Admit() {
		if now.Equal(at) {
			i.sim.stats.alignedTaken.Add(1)
		}
		return b, true, nil
	}
	i.sim.stats.refused.Add(1)
	if now.Equal(at) {
		i.sim.stats.alignedTaken.Add(1)
		i.sim.stats.alignedRefused.Add(1)
	}
	if first {
		i.sim.stats.refusedFirst.Add(1)
	}
	i.sim.logf("%s's Admit refused %d records of %s at its leases' deadline (first delivery: %v)", i.id, n, shard, first)
	return nil, false, nil
}

// checkAlignedLive fails a passing run of at least csimRefusalsFrom
// schedules in which no pipeline took a batch at the instant its leases'
// deadline passed: the aligned wake no longer lands on that instant. It
// does not ask for a refusal there (alignedRefused), which the bubble's
// order of timers leaves to chance.
func checkAlignedLive(t *testing.T, stats *csimStats) {
	t.Helper()
	if n := stats.schedules.Load(); n >= csimRefusalsFrom && stats.alignedTaken.Load() == 0 && !t.Failed() {
		t.Errorf("consumer simulation: no batch taken at a leases' deadline instant in %d schedules (%d aligned wakes armed): the aligned wake no longer lands there", n, stats.alignedArmed.Load())
	}
}
