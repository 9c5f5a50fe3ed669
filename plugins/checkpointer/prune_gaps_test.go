package checkpointer

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/connect-kinesis/connect-kinesis/internal/consumer"
	"github.com/connect-kinesis/connect-kinesis/internal/testenv"
)

// Pruning a shard also removes its own start (`_start:<shard>`), which an
// import or a reset wrote for a shard its source had not started: before,
// the field stayed for ever.
func TestIntegrationPruneRemovesTheShardsOwnStart(t *testing.T) {
	t.Parallel()
	r := testenv.NewRedis(t)
	s := newTestCheckpointer(t, backend{url: r.URL(), kind: KindSimple}, t.Name()).
		Stream("arn:aws:kinesis:us-east-1:000000000000:stream/orders")
	ctx := t.Context()
	_, err := s.Join(ctx)
	require.NoError(t, err)
	c := r.Client()
	defer c.Close()
	require.NoError(t, c.HSet(ctx, s.Keys().Checkpoints, shardStartPrefix+"shard-old", "trim_horizon", shardStartPrefix+"shard-kept", "trim_horizon").Err())

	pruned, err := s.Prune(ctx, []string{"shard-old"})
	require.NoError(t, err)
	assert.Equal(t, []string{"shard-old"}, pruned)
	fields, err := c.HKeys(ctx, s.Keys().Checkpoints).Result()
	require.NoError(t, err)
	assert.Equal(t, []string{shardStartPrefix + "shard-kept"}, fields, "the pruned shard's own start is gone, the other's kept")
}

// The shards a checkpoint or a shard start is stored for are listed, so a
// checkpoint that a reset or an import wrote for a shard nobody ever
// leased can be pruned once the stream no longer lists it.
func TestIntegrationCheckpointedShardsListsEveryShardWithAPosition(t *testing.T) {
	t.Parallel()
	r := testenv.NewRedis(t)
	s := newTestCheckpointer(t, backend{url: r.URL(), kind: KindSimple}, t.Name()).
		Stream("arn:aws:kinesis:us-east-1:000000000000:stream/orders")
	ctx := t.Context()
	_, err := s.Join(ctx)
	require.NoError(t, err)
	c := r.Client()
	defer c.Close()
	require.NoError(t, c.HSet(ctx, s.Keys().Checkpoints, "shard-1", "5", shardStartPrefix+"shard-2", "trim_horizon", startField, "latest").Err())
	got, err := s.CheckpointedShards(ctx)
	require.NoError(t, err)
	assert.ElementsMatch(t, []string{"shard-1", "shard-2"}, got)
}

// A holder paused past its lease, whose expired lease another instance
// pruned (its shard trimmed), is told its lease is lost when it wakes, not
// that the store forgot the group: before, RenewAll answered FORGOT, the
// holder logged "The checkpoint store forgot this group's state (Redis
// restarted empty, ...)" and its re-seed wrote the pruned entries back.
func TestIntegrationAPrunedLeaseIsLostNotForgotten(t *testing.T) {
	t.Parallel()
	stores, _ := forgetStores(t, 2, time.Second)
	holder, pruner := stores[0], stores[1]
	ctx := t.Context()
	for _, s := range stores {
		_, err := s.Join(ctx)
		require.NoError(t, err)
	}
	gone := mustAcquire(t, holder, "shard-trimmed")
	kept := mustAcquire(t, holder, "shard-1")
	require.NoError(t, holder.Commit(ctx, gone, consumer.Position{Sequence: "7"}))
	time.Sleep(1100 * time.Millisecond) // the holder is paused past its lease
	pruned, err := pruner.Prune(ctx, []string{"shard-trimmed"})
	require.NoError(t, err)
	require.Equal(t, []string{"shard-trimmed"}, pruned)

	_, lost, err := holder.RenewAll(ctx, "a", []consumer.Lease{gone, kept})
	require.NoError(t, err, "a pruned lease is no sign of a store that forgot")
	assert.Equal(t, []string{"shard-trimmed"}, lost)

	res, err := holder.Reseed(ctx, consumer.Seed{Owner: "a", Checkpoints: map[string]consumer.Position{"shard-trimmed": {Sequence: "7"}},
		Closed: []string{"shard-trimmed"}, Leases: []consumer.Lease{gone}})
	require.NoError(t, err)
	assert.Equal(t, []string{"shard-trimmed"}, res.Lost, "a re-seed does not take a pruned shard's lease again")
	cps, err := holder.Checkpoints(ctx)
	require.NoError(t, err)
	assert.NotContains(t, cps, "shard-trimmed", "nor write its checkpoint back")
	closed, err := holder.ClosedShards(ctx)
	require.NoError(t, err)
	assert.NotContains(t, closed, "shard-trimmed", "nor its close")
}
