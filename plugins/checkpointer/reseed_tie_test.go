package checkpointer

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/connect-kinesis/connect-kinesis/internal/consumer"
)

// A holder paused (or cut off) while Redis is flushed keeps its shard
// against a newcomer that took it from the empty store: after a wipe the
// tokens start again at 1, the newcomer's first take of a shard gets token
// 1 and so does the holder's lease of a shard that never moved. The tie
// goes to the holder, whose group record (the older) wins, and its
// position replaces the one the newcomer committed from the new record's
// start, so the holder goes on from where it was and nothing in between is
// skipped. The newcomer, re-seeding once it finds its record replaced,
// loses the shard.
func TestIntegrationReseedTieGoesToTheHolder(t *testing.T) {
	t.Parallel()
	stores, red := forgetStores(t, 2, 30*time.Second)
	holder, newcomer := stores[0], stores[1]
	ctx := t.Context()
	_, err := holder.Join(ctx)
	require.NoError(t, err)
	held, err := holder.Acquire(ctx, "shard-0", "holder")
	require.NoError(t, err)
	require.Equal(t, int64(1), held.Token)
	require.NoError(t, holder.Commit(ctx, held.Lease, consumer.Position{Sequence: "100"}))

	c := red.Client()
	defer c.Close()
	require.NoError(t, c.FlushAll(ctx).Err())

	_, err = newcomer.Join(ctx)
	require.NoError(t, err)
	took, err := newcomer.Acquire(ctx, "shard-0", "newcomer")
	require.NoError(t, err)
	require.Equal(t, int64(1), took.Token, "a take after a wipe starts the tokens again")
	require.NoError(t, newcomer.Commit(ctx, took.Lease, consumer.Position{Sequence: "900"}))

	res, err := holder.Reseed(ctx, consumer.Seed{Owner: "holder",
		Checkpoints: map[string]consumer.Position{"shard-0": {Sequence: "150"}}, Leases: []consumer.Lease{held.Lease}})
	require.NoError(t, err)
	assert.Empty(t, res.Lost, "an equal token goes to the holder")
	assert.Equal(t, []string{"shard-0"}, renewedShards(res))
	cps, err := holder.Checkpoints(ctx)
	require.NoError(t, err)
	assert.Equal(t, consumer.Position{Sequence: "150"}, cps["shard-0"],
		"the holder's position replaces the newcomer's, which started from the forgotten record's start")
	require.NoError(t, holder.Commit(ctx, held.Lease, consumer.Position{Sequence: "160"}))

	assert.ErrorIs(t, newcomer.Commit(ctx, took.Lease, consumer.Position{Sequence: "950"}), consumer.ErrStoreForgot,
		"the newcomer's record was replaced")
	res, err = newcomer.Reseed(ctx, consumer.Seed{Owner: "newcomer",
		Checkpoints: map[string]consumer.Position{"shard-0": {Sequence: "950"}}, Leases: []consumer.Lease{took.Lease}})
	require.NoError(t, err)
	assert.Equal(t, []string{"shard-0"}, res.Lost, "the newcomer loses the tie it took from the forgotten record")
	assert.Empty(t, res.Renewed)
	_, err = holder.Renew(ctx, held.Lease)
	assert.NoError(t, err, "the holder keeps the shard")
	assert.ErrorIs(t, newcomer.Commit(ctx, took.Lease, consumer.Position{Sequence: "950"}), consumer.ErrLeaseLost)
}
