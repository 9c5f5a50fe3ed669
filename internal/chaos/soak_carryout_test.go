package chaos

import (
	"context"
	"errors"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// The first event that fails ends the schedule: an event under way sees
// its context end, a later one is not carried out, and the failure that
// comes out first is that one, with the time it was drawn for and the
// time it failed (seed 14 with efo: 16 operations ran after a failed
// deletion, and the line gave only the time the deletion was drawn for).
func TestScheduleEndsAtItsFirstFailure(t *testing.T) {
	refused := errors.New("DeleteStream: connection refused")
	underWay := make(chan struct{})
	var cutShort, later atomic.Bool
	evs := []soakEvent{
		{at: 0, class: ClassStreams},
		{at: 0, class: ClassKill},
		{at: time.Hour, class: ClassPause},
	}
	do := func(ctx context.Context, e soakEvent) error {
		switch e.class {
		case ClassStreams:
			<-underWay
			time.Sleep(50 * time.Millisecond)
			return refused
		case ClassKill:
			close(underWay)
			<-ctx.Done()
			cutShort.Store(true)
			return ctx.Err()
		default:
			later.Store(true)
			return nil
		}
	}
	sc := carryOut(t.Context(), time.Now(), evs, do)
	var first error
	select {
	case first = <-sc.errs:
	case <-time.After(10 * time.Second):
		t.Fatal("the failure never came out")
	}
	require.Eventually(t, cutShort.Load, 5*time.Second, 10*time.Millisecond,
		"the event under way did not see the schedule end at the failure")
	stopped := make(chan struct{})
	go func() { sc.stop(); close(stopped) }()
	select {
	case <-stopped:
	case <-time.After(10 * time.Second):
		t.Fatal("the schedule did not stop: it waits for the event an hour away")
	}
	require.ErrorIs(t, first, refused, "the first failure comes out first")
	assert.Contains(t, first.Error(), "streams drawn for t=0s, failed at t=")
	assert.NotContains(t, first.Error(), "failed at t=0s:", "the time it failed, not the time it was drawn for")
	assert.False(t, later.Load(), "an event after the failure was carried out")
}
