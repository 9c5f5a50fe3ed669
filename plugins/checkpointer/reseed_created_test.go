package checkpointer

import (
	"testing"
	"time"

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
	stores, red := forgetStores(t, 2, 30*time.Second)
	holder, fresh := stores[0], stores[1]
	ctx := t.Context()
	deleted := time.UnixMilli(1_700_000_000_000)
	_, err := holder.Join(ctx)
	require.NoError(t, err)
	_, err = holder.StreamCreated(ctx, deleted, deleted)
	require.NoError(t, err)
	take, err := holder.Acquire(ctx, "shard-0", "a")
	require.NoError(t, err)
	pos := consumer.Position{Sequence: "49590338271490256608559692538361571095921575989136588898"}
	require.NoError(t, holder.Commit(ctx, take.Lease, pos))

	c := red.Client()
	defer c.Close()
	require.NoError(t, c.FlushAll(ctx).Err())
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
