package checkpointer

import (
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/connect-kinesis/connect-kinesis/internal/consumer"
)

// A holder re-seeds a store that forgot (Redis came back empty), and the
// stream is then deleted and created again under its name. The re-seed
// writes back the creation time the checkpoints belong to, so the new
// stream's first check finds the checkpoints of another stream and clears
// them. Without it the check found no creation time recorded, adopted the
// new one, and kept the deleted stream's checkpoints, which Kinesis
// refuses for every shard of the new stream: it was never read (the soak's
// streams class, seeds 1 and 2).
func TestIntegrationReseedKeepsTheCreationTimeOfItsCheckpoints(t *testing.T) {
	t.Parallel()
	holder, fresh, c, take, pos, deleted := heldThenForgotten(t, "shard-0")
	ctx := t.Context()
	var err error
	_, err = holder.Reseed(ctx, consumer.Seed{Owner: "a", Checkpoints: map[string]consumer.Position{"shard-0": pos}, Created: deleted, Leases: []consumer.Lease{take.Lease}})
	require.NoError(t, err)

	// The stream is deleted and created again; a coordinator of the new
	// stream compares its creation time.
	recreated := deleted.Add(time.Hour)
	cleared, err := fresh.StreamCreated(ctx, recreated, recreated)
	require.NoError(t, err)
	assert.True(t, cleared, "the re-seeded checkpoints are of the deleted stream")
	ck, err := c.HGetAll(ctx, fresh.keys.Checkpoints).Result()
	require.NoError(t, err)
	assert.NotContains(t, ck, "shard-0", "the deleted stream's checkpoint is gone: %v", ck)
}

// The other order: the store forgot, an instance of the new stream (deleted
// and created again meanwhile) recorded the new creation time first, and a
// holder of the deleted stream re-seeds after it. Its seed must write
// nothing of the deleted stream (no checkpoint, closed shard or lease), and
// its leases are lost. Before, the seed's checkpoints landed in the new
// stream's state, and Kinesis found no record at them: shard 1 of the
// soak's soak-dyn-2#8 was never read (seed 3, 1 h, 545 records).
func TestIntegrationReseedOfADeletedStreamWritesNothingIntoTheNewOne(t *testing.T) {
	t.Parallel()
	holder, fresh, c, take, pos, deleted := heldThenForgotten(t, "shard-1")
	ctx := t.Context()
	var err error
	recreated := deleted.Add(time.Hour)
	_, err = fresh.Join(ctx)
	require.NoError(t, err)
	cleared, err := fresh.StreamCreated(ctx, recreated, recreated)
	require.NoError(t, err)
	assert.False(t, cleared, "nothing recorded yet: the new stream's time is recorded")

	res, err := holder.Reseed(ctx, consumer.Seed{Owner: "a", Checkpoints: map[string]consumer.Position{"shard-1": pos},
		Closed: []string{"shard-0"}, Created: deleted, Leases: []consumer.Lease{take.Lease}})
	require.NoError(t, err)
	assert.Equal(t, []string{"shard-1"}, res.Lost, "the deleted stream's lease is lost")
	assert.Empty(t, res.Renewed)
	ck, err := c.HGetAll(ctx, fresh.keys.Checkpoints).Result()
	require.NoError(t, err)
	assert.NotContains(t, ck, "shard-1", "no checkpoint of the deleted stream: %v", ck)
	assert.NotContains(t, ck, "shard-0")
	closed, err := c.SMembers(ctx, fresh.keys.Closed).Result()
	require.NoError(t, err)
	assert.Empty(t, closed, "no closed shard of the deleted stream")
	leases, err := c.HGetAll(ctx, fresh.keys.Leases).Result()
	require.NoError(t, err)
	assert.NotContains(t, leases, "shard-1", "no lease of the deleted stream: the new stream's shard is free to take")
}

// heldThenForgotten is the start of both tests: a holder of a stream
// created at deleted commits pos for shard, and Redis is then flushed. It
// returns the holder's store, another instance's store of the same group,
// a client of the Redis, the holder's take and the creation time.
func heldThenForgotten(t *testing.T, shard string) (holder, fresh *Store, c *redis.Client, take consumer.Take, pos consumer.Position, deleted time.Time) {
	t.Helper()
	stores, red := forgetStores(t, 2, 30*time.Second)
	holder, fresh = stores[0], stores[1]
	ctx := t.Context()
	deleted = time.UnixMilli(1_700_000_000_000)
	_, err := holder.Join(ctx)
	require.NoError(t, err)
	_, err = holder.StreamCreated(ctx, deleted, deleted)
	require.NoError(t, err)
	take, err = holder.Acquire(ctx, shard, "a")
	require.NoError(t, err)
	pos = consumer.Position{Sequence: "49590338271490256608559692538361571095921575989136588898"}
	require.NoError(t, holder.Commit(ctx, take.Lease, pos))
	c = red.Client()
	t.Cleanup(func() { c.Close() })
	require.NoError(t, c.FlushAll(ctx).Err())
	return holder, fresh, c, take, pos, deleted
}

// The third order: the store forgot, and an instance that had not yet
// seen the stream created again (it started from the group's listing of
// the deleted stream) re-seeds first, with the deleted stream's creation
// time. The holder of the new stream re-seeds second: its seed wins, the
// deleted stream's state is cleared, and its checkpoint and lease are
// written. Before, the first re-seed's time stood, the holder lost its
// lease and wrote nothing, and the first instance's next listing then
// cleared the new stream's checkpoints: soak seed 7 (1 h, 2026-12-04),
// soak-dyn-2#11 read again from its start, 91 duplicates outside every
// window.
func TestIntegrationReseedOfTheNewStreamWinsOverOneOfTheDeletedStream(t *testing.T) {
	t.Parallel()
	stale, fresh, c, staleTake, stalePos, deleted := heldThenForgotten(t, "shard-0")
	ctx := t.Context()
	recreated := deleted.Add(time.Hour)
	_, err := stale.Reseed(ctx, consumer.Seed{Owner: "a", Checkpoints: map[string]consumer.Position{"shard-0": stalePos},
		Closed: []string{"shard-9"}, Created: deleted, Leases: []consumer.Lease{staleTake.Lease}})
	require.NoError(t, err)

	// The holder of the new stream: it had joined the group and taken
	// shard-1 of the new stream before the store forgot.
	_, err = fresh.Join(ctx)
	require.NoError(t, err)
	newPos := consumer.Position{Sequence: "49590338271490256608559692538361571095921575989136588999"}
	newLease := consumer.Lease{Shard: "shard-1", Owner: "b", Token: 3}
	res, err := fresh.Reseed(ctx, consumer.Seed{Owner: "b", Checkpoints: map[string]consumer.Position{"shard-1": newPos},
		Created: recreated, Leases: []consumer.Lease{newLease}})
	require.NoError(t, err)
	assert.Empty(t, res.Lost, "the new stream's holder keeps its lease")
	require.Len(t, res.Renewed, 1)
	assert.Equal(t, "shard-1", res.Renewed[0].Shard)

	ck, err := c.HGetAll(ctx, fresh.keys.Checkpoints).Result()
	require.NoError(t, err)
	assert.Equal(t, newPos.String(), ck["shard-1"], "the new stream's checkpoint is written")
	assert.NotContains(t, ck, "shard-0", "the deleted stream's checkpoint is cleared: %v", ck)
	closed, err := c.SMembers(ctx, fresh.keys.Closed).Result()
	require.NoError(t, err)
	assert.Empty(t, closed, "no closed shard of the deleted stream")
	leases, err := c.HGetAll(ctx, fresh.keys.Leases).Result()
	require.NoError(t, err)
	assert.NotContains(t, leases["shard-0"], "a", "the deleted stream's lease is fenced: %v", leases)

	// Every instance's next check of the new stream clears nothing.
	cleared, err := fresh.StreamCreated(ctx, recreated, recreated)
	require.NoError(t, err)
	assert.False(t, cleared, "the new stream's time is recorded: nothing to clear")
	ck, err = c.HGetAll(ctx, fresh.keys.Checkpoints).Result()
	require.NoError(t, err)
	assert.Equal(t, newPos.String(), ck["shard-1"])
	// And the instance of the deleted stream, once it sees the stream
	// again, is told it saw an older one.
	_, err = stale.StreamCreated(ctx, deleted, deleted)
	assert.ErrorIs(t, err, consumer.ErrOlderStream)
}
