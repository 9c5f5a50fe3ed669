package kinesisx

import (
	"context"
	"testing"
	"testing/synctest"
	"time"
)

// A caller whose context has already ended takes no permit, even from an
// idle Pace: Wait returns ctx's error and the next caller goes at once.
// Wait's first select picks at random between a free turn and a done
// context, and a turn taken with no wait left to do recorded a permit and
// returned nil (about one call in two): the caller's call then fails on
// its context, and the next one waits a whole interval (1.1 s at 1/s).
func TestPaceGivesNoPermitToACallerWhoseContextEnded(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		ended, cancel := context.WithCancel(t.Context())
		cancel()
		for i := range 20 {
			p := NewPace(1)
			if err := p.Wait(ended); err == nil {
				t.Errorf("pace %d: a caller whose context had ended was given a permit", i)
			}
			start := time.Now()
			if err := p.Wait(t.Context()); err != nil {
				t.Fatal(err)
			}
			if d := time.Since(start); d > 0 {
				t.Errorf("pace %d: the next caller waited %v behind a caller whose context had ended", i, d)
			}
		}
	})
}
