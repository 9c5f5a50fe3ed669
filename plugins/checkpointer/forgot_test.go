package checkpointer

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/connect-kinesis/connect-kinesis/internal/consumer"
	"github.com/connect-kinesis/connect-kinesis/internal/testenv"
)

// forgetStores returns n stores of one group and stream on their own
// redis-server, each from its own checkpointer (as n instances), and the
// server.
func forgetStores(t *testing.T, n int, period time.Duration) ([]*Store, *testenv.Redis) {
	t.Helper()
	red := testenv.NewRedis(t)
	out := make([]*Store, n)
	for i := range out {
		cfg := DefaultConfig()
		cfg.RedisURL, cfg.Group, cfg.LeasePeriod = red.URL(), "g", period
		c, err := New(t.Context(), cfg, nil, nil)
		require.NoError(t, err)
		t.Cleanup(func() { _ = c.Close() })
		out[i] = c.Stream("arn:aws:kinesis:us-east-1:000000000000:stream/s")
	}
	return out, red
}

// An instance that joined but never took a shard (a standby) knows the
// group record from its Join: once Redis comes back empty its take and
// its read of the closed shards say the store forgot, and it takes no
// shard a holder still reads from a fresh record.
func TestIntegrationStandbyDoesNotTakeFromAForgettingStore(t *testing.T) {
	t.Parallel()
	stores, red := forgetStores(t, 2, 30*time.Second)
	a, b := stores[0], stores[1]
	_, err := a.Join(t.Context())
	require.NoError(t, err)
	_, err = b.Join(t.Context())
	require.NoError(t, err)
	take, err := a.Acquire(t.Context(), "shard-0", "a")
	require.NoError(t, err)
	require.NoError(t, a.Commit(t.Context(), take.Lease, consumer.Position{Sequence: "42"}))
	require.NoError(t, a.CloseShard(t.Context(), mustAcquire(t, a, "shard-p")))

	c := red.Client()
	defer c.Close()
	require.NoError(t, c.FlushAll(t.Context()).Err())

	_, err = b.ClosedShards(t.Context())
	assert.ErrorIs(t, err, consumer.ErrStoreForgot, "the standby's read of the closed shards must not take the empty set")
	got, err := b.Acquire(t.Context(), "shard-0", "b")
	require.ErrorIs(t, err, consumer.ErrStoreForgot, "the standby took %+v from a store that came back empty", got.Lease)
	n, err := c.Exists(t.Context(), b.Keys().Epoch, b.Keys().Leases).Result()
	require.NoError(t, err)
	assert.Zero(t, n, "the refused take created no group record and no lease")
}

// CheckGroup, the check a reading instance makes every second, answers
// forgot once the store lost the record or holds another one.
func TestIntegrationCheckGroupSeesAForgettingStore(t *testing.T) {
	t.Parallel()
	stores, red := forgetStores(t, 2, 30*time.Second)
	a, newcomer := stores[0], stores[1]
	require.NoError(t, a.CheckGroup(t.Context()), "a store that never joined knows no record to check")
	_, err := a.Join(t.Context())
	require.NoError(t, err)
	require.NoError(t, a.CheckGroup(t.Context()))
	c := red.Client()
	defer c.Close()
	require.NoError(t, c.FlushAll(t.Context()).Err())
	assert.ErrorIs(t, a.CheckGroup(t.Context()), consumer.ErrStoreForgot, "no record")
	_, err = newcomer.Join(t.Context())
	require.NoError(t, err)
	assert.ErrorIs(t, a.CheckGroup(t.Context()), consumer.ErrStoreForgot, "a newcomer's fresh record")
	require.NoError(t, newcomer.CheckGroup(t.Context()))
}
