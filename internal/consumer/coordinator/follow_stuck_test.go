package coordinator

import (
	"context"
	"sync/atomic"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/service/kinesis"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/connect-kinesis/connect-kinesis/internal/consumer"
)

// stuckListing is an account of several streams whose ListShards, while
// stuck is set, answers only once let is closed (or its context ends): a
// listing that outlasts the stop, as one retried through a long throttling
// storm does.
type stuckListing struct {
	*streamsAPI
	stuck   atomic.Bool
	waiting atomic.Int32
	let     chan struct{}
}

func (a *stuckListing) ListShards(ctx context.Context, in *kinesis.ListShardsInput, opts ...func(*kinesis.Options)) (*kinesis.ListShardsOutput, error) {
	if a.stuck.Load() {
		a.waiting.Add(1)
		select {
		case <-a.let:
		case <-ctx.Done():
			return nil, ctx.Err()
		}
	}
	return a.streamsAPI.ListShards(ctx, in, opts...)
}

// A stream that stops being followed while its run loop is stuck in a
// listing is stopped for good when the stop's time runs out: nothing of it
// reads on after the stop returned. (Soak seed 5, 1 h: the run loop of a
// deleted stream outlived its stop, found the stream created again and took
// its shard, which the instance's new reader of the stream took too; each
// delivered the same records, neither marked.)
func TestAStreamStoppedWhileItsListingHangsReadsNothingAfter(t *testing.T) {
	t.Parallel()
	api := &stuckListing{streamsAPI: newStreamsAPI(), let: make(chan struct{})}
	k := api.create("t-1", 1, 5, time.Unix(1_700_000_000, 0))
	stores := &storesByStream{}
	var got streamLog
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	a := startFollower(ctx, t, api, stores, "a", &got, []Found{api.found("t-1", consumer.StartTrimHorizon)})
	require.Eventually(t, func() bool { n, _ := got.count("t-1"); return n == 5 }, 10*time.Second, 20*time.Millisecond, "the stream is read")

	api.stuck.Store(true)
	require.Eventually(t, func() bool { return api.waiting.Load() > 0 }, 5*time.Second, 10*time.Millisecond, "a listing waits")
	began := time.Now()
	require.NoError(t, a.Follow(ctx, nil), "stop following the stream")
	t.Logf("the stop returned after %v", time.Since(began).Round(time.Millisecond))
	assert.Empty(t, a.FollowedStreams())

	// Records come after the stop, and the listing answers.
	k.Mu.Lock()
	k.Shards["shardId-000000000000"].Records = 10
	k.Mu.Unlock()
	close(api.let)
	time.Sleep(2 * time.Second) // many poll intervals and listings
	n, dup := got.count("t-1")
	assert.Equal(t, 5, n, "records read after the stop returned")
	assert.Zero(t, dup)
}
