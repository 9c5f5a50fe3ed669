package chaos

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/connect-kinesis/connect-kinesis/internal/consumer"
	"github.com/connect-kinesis/connect-kinesis/internal/testenv"
	"github.com/connect-kinesis/connect-kinesis/plugins/checkpointer"
)

// The holders the soak reads before a wipe are those the wipe meets: a
// holder that releases its shard after the read (an instance stopping at
// that moment) has its release held back until the store is flushed, so
// the release finds the store forgot rather than landing unseen between
// the read and the flush.
func TestIntegrationAWipeMeetsTheHoldersTheSoakRead(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	red, st := joinedStore(t)
	held, err := st.Acquire(ctx, "shard-1", "vm-4242-a1b2c3")
	require.NoError(t, err)
	released, err := st.Acquire(ctx, "shard-2", "vm-4242-a1b2c3")
	require.NoError(t, err)
	require.NoError(t, st.Release(ctx, released.Lease))

	soakClient := red.Client()
	t.Cleanup(func() { _ = soakClient.Close() })
	holders, err := pauseWritesAndReadLeases(ctx, soakClient, map[string]string{"soak-s": st.Keys().Leases})
	require.NoError(t, err)
	assert.Equal(t, map[string]int{"soak-s/shard-1": 4242, "soak-s/shard-2": 0}, holders)

	done := make(chan error, 1)
	go func() { done <- st.Release(ctx, held.Lease) }()
	select {
	case err := <-done:
		t.Fatalf("a release landed between the read of the holders and the wipe (err %v)", err)
	case <-time.After(500 * time.Millisecond):
	}
	require.NoError(t, flushPaused(ctx, soakClient))
	select {
	case err := <-done:
		assert.ErrorIs(t, err, consumer.ErrStoreForgot, "the release held back runs on the flushed store")
	case <-time.After(10 * time.Second):
		t.Fatal("the release is still held back after the flush")
	}
	n, err := soakClient.DBSize(ctx).Result()
	require.NoError(t, err)
	assert.Zero(t, n, "nothing written back after the flush")
}

// joinedStore starts a redis-server and returns it with the store of one
// stream, joined to group g (30 s leases), as an instance's.
func joinedStore(t *testing.T) (*testenv.Redis, *checkpointer.Store) {
	t.Helper()
	red, err := testenv.StartRedis(t.Context(), testenv.RedisOptions{})
	testenv.Require(t, "starting redis-server", err)
	t.Cleanup(red.Close)
	cfg := checkpointer.DefaultConfig()
	cfg.Group, cfg.LeasePeriod = "g", 30*time.Second
	instance := red.Client()
	t.Cleanup(func() { _ = instance.Close() })
	st := checkpointer.NewFromClient(instance, cfg, nil, nil).Stream("arn:aws:kinesis:us-east-1:000000000000:stream/s")
	_, err = st.Join(t.Context())
	require.NoError(t, err)
	return red, st
}
