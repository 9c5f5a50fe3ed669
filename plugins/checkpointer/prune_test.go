package checkpointer

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/connect-kinesis/connect-kinesis/internal/consumer"
	"github.com/connect-kinesis/connect-kinesis/internal/testenv"
)

// TestIntegrationPruneSingle and TestIntegrationPruneCluster check the
// prune script on one redis-server and on a Cluster (one slot: no
// CROSSSLOT).
func TestIntegrationPruneSingle(t *testing.T) {
	t.Parallel()
	r := testenv.NewRedis(t)
	runPrune(t, backend{url: r.URL(), kind: KindSimple})
}

func TestIntegrationPruneCluster(t *testing.T) {
	t.Parallel()
	c := testenv.NewRedisCluster(t)
	runPrune(t, backend{url: c.URL(), kind: KindCluster})
}

// A pruned shard loses every entry: checkpoint, closed mark, lease,
// progress and hand-off request. A shard whose lease is live keeps all of
// its own, and its holder goes on renewing and committing.
func runPrune(t *testing.T, b backend) {
	s := newTestCheckpointer(t, b, t.Name(), func(c *Config) { c.LeasePeriod = 30 * time.Second }).
		Stream("arn:aws:kinesis:us-east-1:000000000000:stream/orders")
	ctx := t.Context()
	_, err := s.Join(ctx)
	require.NoError(t, err)
	take := func(shard string) consumer.Lease {
		tk, err := s.Acquire(ctx, shard, "a")
		require.NoError(t, err)
		return tk.Lease
	}
	closed, released, live := take("closed-0"), take("released-1"), take("live-2")
	require.NoError(t, s.Commit(ctx, closed, consumer.Position{Sequence: "7"}))
	require.NoError(t, s.CloseShard(ctx, closed))
	require.NoError(t, s.Commit(ctx, released, consumer.Position{Sequence: "9"}))
	require.NoError(t, s.PublishProgress(ctx, "a", map[string]consumer.Progress{"released-1": {LagMillis: 5}, "live-2": {LagMillis: 6}}))
	require.NoError(t, s.RequestHandoff(ctx, "released-1", "b"))
	require.NoError(t, s.Release(ctx, released))
	require.NoError(t, s.Commit(ctx, live, consumer.Position{Sequence: "11"}))

	pruned, err := s.Prune(ctx, []string{"closed-0", "released-1", "live-2", "never-seen"})
	require.NoError(t, err)
	assert.ElementsMatch(t, []string{"closed-0", "released-1", "never-seen"}, pruned, "a live lease is kept")

	ck, err := s.Checkpoints(ctx)
	require.NoError(t, err)
	assert.Equal(t, map[string]consumer.Position{"live-2": {Sequence: "11"}}, ck)
	cl, err := s.ClosedShards(ctx)
	require.NoError(t, err)
	assert.Empty(t, cl)
	ls, err := s.Leases(ctx)
	require.NoError(t, err)
	assert.Equal(t, []string{"live-2"}, keysOf(ls))
	pp, err := s.Progress(ctx)
	require.NoError(t, err)
	assert.Equal(t, []string{"live-2"}, keysOf(pp))
	hs, err := s.c.client.HGetAll(ctx, s.keys.Handoff).Result()
	require.NoError(t, err)
	assert.Empty(t, hs)

	renewed, lost, err := s.RenewAll(ctx, "a", []consumer.Lease{live})
	require.NoError(t, err)
	assert.Empty(t, lost)
	require.Len(t, renewed, 1)
	require.NoError(t, s.Commit(ctx, renewed[0], consumer.Position{Sequence: "12"}))
}

func keysOf[V any](m map[string]V) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	return out
}
