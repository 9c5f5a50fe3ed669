package kinesisx

import (
	"context"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// The calls stay within the account's limit: 20 describes a second are
// sent 55 ms apart, the first at once.
func TestPaceSpacesCallsWithinTheLimit(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		p := NewPace(MaxDescribeStreamSummaryPerSecond)
		start := time.Now()
		require.NoError(t, p.Wait(t.Context()))
		assert.Zero(t, time.Since(start), "an idle pace lets the first call go at once")
		for range 20 {
			require.NoError(t, p.Wait(t.Context()))
		}
		assert.Equal(t, 20*55*time.Millisecond, time.Since(start), "20 calls more take 20 intervals")
	})
}

// Waiters that give up take nothing: the next caller waits one interval
// at most, not the sum of the abandoned waits. With a limiter that keeps
// the permits of callers that gave up, the 200 abandoned describes of
// streams followed and released made the next one wait 11 s.
func TestPaceGivesNothingToWaitersThatGaveUp(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		p := NewPace(MaxDescribeStreamSummaryPerSecond)
		require.NoError(t, p.Wait(t.Context())) // the kept permit
		ctx, cancel := context.WithCancel(t.Context())
		var wg sync.WaitGroup
		for range 200 {
			wg.Go(func() { assert.ErrorIs(t, p.Wait(ctx), context.Canceled) })
		}
		synctest.Wait()
		cancel()
		wg.Wait()
		start := time.Now()
		require.NoError(t, p.Wait(t.Context()))
		assert.LessOrEqual(t, time.Since(start), 55*time.Millisecond)
	})
}

// A waiter's context bounds its wait.
func TestPaceWaitEndsWithItsContext(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		p := NewPace(1)
		require.NoError(t, p.Wait(t.Context()))
		ctx, cancel := context.WithTimeout(t.Context(), 100*time.Millisecond)
		defer cancel()
		assert.ErrorIs(t, p.Wait(ctx), context.DeadlineExceeded)
	})
}
