package kinesisx

import (
	"context"
	"time"
)

// Pace spaces the calls of an API that Kinesis limits per account: one
// call per 1/perSecond of a second plus 10% (a call's send time wobbles by
// milliseconds, and Kinesis counts any second), the waiters served in the
// order they came, with one permit kept while nobody waits.
//
// A waiter whose context ends leaves the queue without taking a permit.
// failsafe-go's rate limiters reserve a permit when a wait starts and keep
// it when the caller gives up; the describe limiter of a process whose
// followed streams came and went (each start describing the stream, each
// stop giving up that wait) held 20 s of permits that no call used, and a
// reader that found its stream deleted and created again waited behind
// them before it could describe it. Pace is a time.Ticker: it is in the
// runtime's timer heap only while a goroutine waits on it, so an idle one
// costs nothing, and a Pace made in a synctest bubble runs on the bubble's
// clock.
type Pace struct {
	tick *time.Ticker
	// first is the permit of a new Pace, whose ticker first ticks an
	// interval after it was made.
	first chan struct{}
}

// NewPace returns a Pace of perSecond calls a second, less 10%.
func NewPace(perSecond int) *Pace {
	p := &Pace{tick: time.NewTicker(time.Second * 11 / 10 / time.Duration(perSecond)), first: make(chan struct{}, 1)}
	p.first <- struct{}{}
	return p
}

// Wait returns once the caller may send its call, or ctx's error when ctx
// ends first.
func (p *Pace) Wait(ctx context.Context) error {
	select {
	case <-p.first:
		return nil
	case <-p.tick.C:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}
