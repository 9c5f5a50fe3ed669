package checkpointer

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/connect-kinesis/connect-kinesis/internal/streams"
	"github.com/connect-kinesis/connect-kinesis/internal/testenv"
)

// Settles the reading that prune_stream was not fenced by the discovery
// token (only discovery_forget was): an instance that published a listing
// in which a stream had been gone for the retention, then paused before
// its prune, deleted the stream's checkpoints after another instance had
// claimed the discovery and found the stream again (tagged again, say),
// before any instance had taken a lease of it. The stream was then read
// from new_stream_start_position rather than from its checkpoints. The
// prune of a holder whose lease another instance may have claimed since
// is refused.
func TestIntegrationPruneByAStaleDiscoveryHolderIsFenced(t *testing.T) {
	t.Parallel()
	r := testenv.NewRedis(t)
	admin := r.Client()
	defer admin.Close()
	c := newTestCheckpointer(t, backend{url: r.URL(), kind: KindSimple}, t.Name(), func(c *Config) { c.LeasePeriod = 30 * time.Second })
	ctx := t.Context()
	const interval = 200 * time.Millisecond
	claim := func(owner string) DiscoveryClaim {
		t.Helper()
		for {
			cl, err := c.ClaimDiscovery(ctx, owner, interval)
			require.NoError(t, err)
			if cl.Granted {
				return cl
			}
			time.Sleep(10 * time.Millisecond)
		}
	}
	publish := func(owner string, token int64, found ...streams.Identity) []string {
		t.Helper()
		published, expired, err := c.PublishDiscovery(ctx, owner, token, found, 0)
		require.NoError(t, err)
		require.True(t, published)
		return expired
	}
	x := ident("x-1", 1000)
	st := c.Stream(x.ARN)
	publish("a", claim("a").Token, x)
	require.NoError(t, admin.HSet(ctx, st.keys.Checkpoints, "shardId-0", "49590000000000000000000000000000000000000000000000000001").Err())

	// x left the listing of a, long enough ago to be pruned (retention 0)...
	require.Empty(t, publish("a", claim("a").Token), "x is gone since this listing")
	stale := claim("a")
	require.Equal(t, []string{x.ARN}, publish("a", stale.Token))
	// ...and a pauses before its prune: b claims and finds x again.
	publish("b", claim("b").Token, x)
	d, err := c.ReadDiscovery(ctx)
	require.NoError(t, err)
	require.Len(t, d.Listed(), 1, "x is listed again")

	pruned, err := c.PruneReleased(ctx, "a", stale.Token, interval, x.ARN)
	require.ErrorIs(t, err, ErrDiscoveryLeaseLost)
	assert.False(t, pruned, "a prune under a discovery token another instance has replaced is refused")
	n, err := admin.Exists(ctx, st.keys.Checkpoints).Result()
	require.NoError(t, err)
	assert.EqualValues(t, 1, n, "the checkpoints of a stream listed again are kept")

	// A holder whose check passed, and whose deletion lands after the
	// time it was given (it paused between the two calls), deletes
	// nothing either.
	k := st.keys
	res, err := pruneStreamScript.Run(ctx, c.client,
		[]string{k.Checkpoints, k.Closed, k.Leases, k.Members, k.Handoff, k.Progress, k.Epoch, k.Delivered}, st.periodMillis(), time.Now().Add(-time.Second).UnixMilli()).Int64()
	require.NoError(t, err)
	assert.EqualValues(t, -1, res)
	n, err = admin.Exists(ctx, st.keys.Checkpoints).Result()
	require.NoError(t, err)
	assert.EqualValues(t, 1, n)
}
