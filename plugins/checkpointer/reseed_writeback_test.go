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

// A third instance of the kept record re-seeds first (its record replaces
// the newcomer's) and learns from the store the parent the newcomer closed
// under token 1; the paused holder then wins the parent back under its own
// token 1 and its lease lapses (it stops, or is paused again) before it
// reads the parent to its end. The third instance writes the close it
// learned back at its balancing round (its gate keeps a close whose
// lease shows no higher token): the store must refuse it, or the records
// between the holder's position and the parent's end are never read.
//
// Guards: a close written back over a parent won back from a newcomer's
// close once its holder's lease lapsed (records skipped).
func TestIntegrationANewcomersCloseIsNotWrittenBackOverAParentWonBackWhoseHolderLapsed(t *testing.T) {
	t.Parallel()
	stores, red := forgetStores(t, 3, 30*time.Second)
	h, k, n := stores[0], stores[1], stores[2]
	ctx := t.Context()
	for _, s := range []*Store{h, k} {
		_, err := s.Join(ctx)
		require.NoError(t, err)
	}
	held := mustAcquire(t, h, "parent")
	require.NoError(t, h.Commit(ctx, held, consumer.Position{Sequence: "100"}))

	c := red.Client()
	defer c.Close()
	require.NoError(t, c.FlushAll(ctx).Err())
	_, err := n.Join(ctx)
	require.NoError(t, err)
	require.NoError(t, n.CloseShard(ctx, mustAcquire(t, n, "parent")))

	_, err = k.Reseed(ctx, consumer.Seed{Owner: "k", Checkpoints: map[string]consumer.Position{"other": {Sequence: "5"}}})
	require.NoError(t, err)
	closed, err := k.ClosedShards(ctx)
	require.NoError(t, err)
	require.True(t, closed["parent"], "the third instance learns the newcomer's close")

	res, err := h.Reseed(ctx, consumer.Seed{Owner: "h",
		Checkpoints: map[string]consumer.Position{"parent": {Sequence: "150"}}, Leases: []consumer.Lease{held}})
	require.NoError(t, err)
	require.Equal(t, []string{"parent"}, renewedShards(res))
	require.NoError(t, c.HSet(ctx, h.Keys().Leases, "parent", "h|1|1").Err(), "the holder's lease lapses")

	_, err = k.Reseed(ctx, consumer.Seed{Owner: "k", Checkpoints: map[string]consumer.Position{}, Closed: []string{"parent"}})
	require.NoError(t, err)
	closed, err = k.ClosedShards(ctx)
	require.NoError(t, err)
	cps, err := k.Checkpoints(ctx)
	require.NoError(t, err)
	assert.False(t, closed["parent"], "the newcomer's close was written back over the parent the holder won back")
	assert.Equal(t, consumer.Position{Sequence: "150"}, cps["parent"], "the holder's position is gone")
}

// A balancing round, read alone or with other streams', tells the shards
// a holder won back from a newcomer's close until its reader closes them:
// an instance that learned the close before cannot tell them from a
// parent taken again after a wipe by the leases alone (both show a live
// lease under a token no higher than the close's).
//
// Guards: a third instance kept the won-back parent closed in its gate
// and let its children be read while the holder read the parent again.
func TestIntegrationARoundTellsTheShardsAHolderWonBackFromAClose(t *testing.T) {
	t.Parallel()
	stores, red := forgetStores(t, 3, 30*time.Second)
	h, k, n := stores[0], stores[1], stores[2]
	ctx := t.Context()
	for _, s := range []*Store{h, k} {
		_, err := s.Join(ctx)
		require.NoError(t, err)
	}
	held := mustAcquire(t, h, "parent")
	require.NoError(t, h.Commit(ctx, held, consumer.Position{Sequence: "100"}))

	c := red.Client()
	defer c.Close()
	require.NoError(t, c.FlushAll(ctx).Err())
	_, err := n.Join(ctx)
	require.NoError(t, err)
	require.NoError(t, n.CloseShard(ctx, mustAcquire(t, n, "parent")))
	_, err = k.Reseed(ctx, consumer.Seed{Owner: "k", Checkpoints: map[string]consumer.Position{"other": {Sequence: "5"}}})
	require.NoError(t, err)
	rd, err := k.ReadRound(ctx, "k")
	require.NoError(t, err)
	require.True(t, rd.Closed["parent"], "the third instance learns the newcomer's close")
	assert.Empty(t, rd.Reopened)

	_, err = h.Reseed(ctx, consumer.Seed{Owner: held.Owner,
		Checkpoints: map[string]consumer.Position{"parent": {Sequence: "150"}}, Leases: []consumer.Lease{held}})
	require.NoError(t, err)
	rd, err = k.ReadRound(ctx, "k")
	require.NoError(t, err)
	assert.False(t, rd.Closed["parent"])
	assert.Equal(t, map[string]bool{"parent": true}, rd.Reopened, "read alone")
	rds, errs := k.ReadRounds(ctx, "k", []consumer.Store{k}, false)
	require.NoError(t, errs[0])
	assert.Equal(t, map[string]bool{"parent": true}, rds[0].Reopened, "read with other streams'")

	require.NoError(t, h.CloseShard(ctx, held))
	rd, err = k.ReadRound(ctx, "k")
	require.NoError(t, err)
	assert.True(t, rd.Closed["parent"], "the holder's reader closed the parent")
	assert.Empty(t, rd.Reopened, "a close settles a shard won back")
}
