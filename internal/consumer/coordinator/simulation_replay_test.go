package coordinator

import (
	"testing"
	"testing/synctest"
	"time"
)

// What a schedule of the consumer simulation shares with the process.
// Every synctest bubble starts at the same virtual instant (2000-01-01
// UTC), while a limiter made at package init keeps the real time of the
// process's start as its origin. The process-wide describe limiter
// (describePermits) made that way answered a bubble's first describe with
// a wait of some 27 years: the bubble, idle but for that timer, jumped to
// the process's real start time, plus the virtual time the schedules
// before it had reached. A schedule's virtual clock then depended on the
// time of day the run began (creation times are truncated to the second)
// and on every schedule run before it, in a long run and in rapid's
// shrinking alike, so a failing seed did not replay.

// csimNewSchedule gives the schedule starting in the caller's bubble what
// a process has at its start: a describe limiter whose clock starts now,
// in the bubble's time. Every bubble of the previous schedule has ended,
// and the simulation runs alone (no parallel test), so nothing else uses
// the limiter meanwhile. Callers restore the package's limiter after their
// last schedule (csimKeepDescribePermits).
func csimNewSchedule() { describePermits = newDescribePermits() }

// csimKeepDescribePermits restores the package's describe limiter once t
// ends: one made in a bubble has the bubble's clock as its origin.
func csimKeepDescribePermits(t *testing.T) {
	orig := describePermits
	t.Cleanup(func() { describePermits = orig })
}

// TestSimulateConsumerDescribePermitsPerSchedule guards the describe
// limiter carried across schedules: a schedule's first describe waited for
// the permit the schedule before it left at a later virtual time.
func TestSimulateConsumerDescribePermitsPerSchedule(t *testing.T) {
	csimKeepDescribePermits(t)
	var waited [2]time.Duration
	for k := range waited {
		synctest.Test(t, func(t *testing.T) {
			csimNewSchedule()
			// The first schedule's describe comes five virtual
			// minutes in, the second's at its start.
			time.Sleep(time.Duration(1-k) * 5 * time.Minute)
			at := time.Now()
			if err := AcquireDescribePermit(t.Context()); err != nil {
				t.Fatal(err)
			}
			waited[k] = time.Since(at)
		})
	}
	for k, w := range waited {
		if w > time.Second {
			t.Errorf("schedule %d's first describe waited %v of virtual time for its permit: the limiter's clock is not the schedule's", k+1, w)
		}
	}
}
