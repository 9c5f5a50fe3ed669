package kinesisx

import (
	"context"
	"time"
)

// Pace spaces the calls of an API that Kinesis limits per account: any two
// calls are at least 1/perSecond of a second plus 10% apart (a call's send
// time wobbles by milliseconds, and Kinesis counts any second), so no
// second holds more than perSecond of them, after an idle spell as much
// as under load. The waiters take their turns in the order they came.
//
// A waiter whose context ends leaves without taking a permit, and nothing
// is reserved ahead. failsafe-go's rate limiters reserve a permit when a
// wait starts and keep it when the caller gives up: the describe limiter
// of a process whose followed streams came and went (each start describing
// the stream, each stop giving up that wait) held 20 s of permits no call
// used, and a reader that found its stream deleted and created again
// waited behind them to describe it. A ticker does not reserve, but after
// an idle spell it hands out a stale tick and then its next one a moment
// later: 6 ListStreams within a second where 5 are allowed.
//
// A Pace reads the clock of the goroutines that use it: one used in a
// synctest bubble must be made there.
type Pace struct {
	interval time.Duration
	// turn holds a token while a waiter has its turn; last, the time of
	// the last permit, is read and written only by that waiter.
	turn chan struct{}
	last time.Time
}

// NewPace returns a Pace of perSecond calls a second, less 10%.
func NewPace(perSecond int) *Pace {
	return &Pace{interval: time.Second * 11 / 10 / time.Duration(perSecond), turn: make(chan struct{}, 1)}
}

// Wait returns once the caller may send its call, or ctx's error when ctx
// ends first.
func (p *Pace) Wait(ctx context.Context) error {
	select {
	case p.turn <- struct{}{}:
	case <-ctx.Done():
		return ctx.Err()
	}
	defer func() { <-p.turn }()
	if d := time.Until(p.last.Add(p.interval)); d > 0 {
		t := time.NewTimer(d)
		defer t.Stop()
		select {
		case <-t.C:
		case <-ctx.Done():
			return ctx.Err()
		}
	}
	// The turn may have come with ctx already ended (select picks at
	// random among ready cases): that caller takes no permit either.
	if err := ctx.Err(); err != nil {
		return err
	}
	p.last = time.Now()
	return nil
}
