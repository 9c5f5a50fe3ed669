package checkpointer

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/connect-kinesis/connect-kinesis/internal/consumer"
)

// After a wipe, an instance re-seeds the kept group record without a
// parent's close (it never knew it), and another takes the parent under a
// fresh token once the re-seed hold is over: nothing provisional, no
// newcomer's record. The instance that closed the parent writes the close
// back at its balancing round (coordinator writeBackClosed, a re-seed of
// closes alone), and the store must take it, so the parent is not read
// again after its children (the coordinator's
// TestAClosedParentTakenAfterAWipeIsNoReset, against the fake store).
//
// Guards: the write-back of a close the store lost was refused because
// the parent was held live, with no provisional state involved.
func TestIntegrationAKnownCloseIsWrittenBackOverAParentTakenAfterAWipe(t *testing.T) {
	t.Parallel()
	stores, red := forgetStores(t, 3, 30*time.Second)
	k, x, y := stores[0], stores[1], stores[2]
	ctx := t.Context()
	for _, s := range stores {
		_, err := s.Join(ctx)
		require.NoError(t, err)
	}
	require.NoError(t, k.CloseShard(ctx, mustAcquire(t, k, "parent")))

	c := red.Client()
	defer c.Close()
	require.NoError(t, c.FlushAll(ctx).Err())
	_, err := x.Reseed(ctx, consumer.Seed{Owner: "x", Checkpoints: map[string]consumer.Position{"child": {Sequence: "5"}}})
	require.NoError(t, err)
	require.NoError(t, c.HDel(ctx, x.Keys().Epoch, reseededField).Err(), "the re-seed hold is over")
	took, err := y.Acquire(ctx, "parent", "y")
	require.NoError(t, err)
	require.Equal(t, int64(1), took.Token)

	_, err = k.Reseed(ctx, consumer.Seed{Owner: "k", Checkpoints: map[string]consumer.Position{}, Closed: []string{"parent"}})
	require.NoError(t, err)
	closed, err := k.ClosedShards(ctx)
	require.NoError(t, err)
	assert.True(t, closed["parent"], "the known close of a parent taken again after a wipe was not written back")
}
