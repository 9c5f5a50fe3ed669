package coordinator

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/connect-kinesis/connect-kinesis/internal/consumer"
	"github.com/connect-kinesis/connect-kinesis/internal/consumer/consumertest"
	"github.com/connect-kinesis/connect-kinesis/internal/kinesisx"
)

// Every instance adds every stream found, each starting at a place of its
// own: with the same order the last stream waited for every other add at
// every instance before any of them leased its shards.
func TestAddOrderIsARotationOfItsOwnPerInstance(t *testing.T) {
	var found []Found
	for i := range 100 {
		found = append(found, Found{Key: fmt.Sprintf("s%03d", i)})
	}
	firsts := map[string]bool{}
	for _, owner := range []string{"i0", "i1", "i2", "i3"} {
		got := addOrder(found, owner)
		assert.ElementsMatch(t, found, got, "%s adds every stream once", owner)
		assert.Equal(t, addOrder(found, owner), got, "%s's order is stable", owner)
		firsts[got[0].Key] = true
	}
	assert.Greater(t, len(firsts), 1, "instances start in different places")
	assert.Len(t, addOrder(found[:1], "i0"), 1)
}

// Describes given up take no permit from the process's describe limit.
// A followed stream's coordinator describes it once it runs, and a stream
// released at once gives that wait up: with a limiter that kept their
// permits, streams followed and released in a loop (TestFollowWhileClosing)
// queued 20 s of permits no call used, and a reader of another stream
// that found its stream created again waited that long to describe it
// (TestFollowKeepsAStreamItsCoordinatorFoundCreatedAgain failed in CI).
func TestDescribesGivenUpLeaveTheLimitToTheNextCaller(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		c, err := New(testConfig(), consumertest.NewKinesis(), func(string) consumer.Store { return consumertest.NewStore(time.Second) }, nil, nil)
		require.NoError(t, err)
		c.describes = kinesisx.NewPace(kinesisx.MaxDescribeStreamSummaryPerSecond)
		require.NoError(t, c.acquireDescribe(t.Context()))
		ctx, cancel := context.WithCancel(t.Context())
		var wg sync.WaitGroup
		for range 350 {
			wg.Go(func() { _ = c.acquireDescribe(ctx) })
		}
		synctest.Wait()
		cancel()
		wg.Wait()
		start := time.Now()
		require.NoError(t, c.acquireDescribe(t.Context()))
		assert.LessOrEqual(t, time.Since(start), time.Second/kinesisx.MaxDescribeStreamSummaryPerSecond*11/10,
			"the next describe waits one interval at most")
	})
}
