package checkpointer

import (
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/connect-kinesis/connect-kinesis/internal/consumer"
)

// A holder paused while Redis is flushed, whose shard a newcomer took from
// the empty store (token 1) and read from its own new record's start, then
// closed (a closed reshard parent reaches its end at once under `latest`)
// or committed and released: the holder's re-seed must not take the shard
// for done. The close or release was made from a position the forgotten
// record resolved, past records only the holder knew it had not read, so
// the holder wins the shard back with its position (the shard reopened),
// whether its token ties with the newcomer's or is higher (3).
//
// Guards: the re-seed took such a shard for done, wrote nothing back and
// left the holder's lease lost, so nobody read the records between the
// holder's position and the newcomer's start.
func TestIntegrationReseedWinsBackAShardTheNewcomerClosedOrReleased(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		token  int64
		closed bool
	}{{1, true}, {3, true}, {1, false}, {3, false}} {
		name := fmt.Sprintf("token-%d-%s", tc.token, map[bool]string{true: "closed", false: "released"}[tc.closed])
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			stores, red := forgetStores(t, 2, 30*time.Second)
			holder, newcomer := stores[0], stores[1]
			ctx := t.Context()
			_, err := holder.Join(ctx)
			require.NoError(t, err)
			var held consumer.Take
			for range tc.token {
				if held.Token > 0 {
					require.NoError(t, holder.Release(ctx, held.Lease))
				}
				held, err = holder.Acquire(ctx, "parent", "holder")
				require.NoError(t, err)
			}
			require.Equal(t, tc.token, held.Token)
			require.NoError(t, holder.Commit(ctx, held.Lease, consumer.Position{Sequence: "100"}))

			c := red.Client()
			defer c.Close()
			require.NoError(t, c.FlushAll(ctx).Err())

			_, err = newcomer.Join(ctx)
			require.NoError(t, err)
			took, err := newcomer.Acquire(ctx, "parent", "newcomer")
			require.NoError(t, err)
			require.Equal(t, int64(1), took.Token, "a take after a wipe starts the tokens again")
			if tc.closed {
				require.NoError(t, newcomer.CloseShard(ctx, took.Lease))
			} else {
				require.NoError(t, newcomer.Commit(ctx, took.Lease, consumer.Position{Sequence: "900"}))
				require.NoError(t, newcomer.Release(ctx, took.Lease))
			}

			res, err := holder.Reseed(ctx, consumer.Seed{Owner: "holder",
				Checkpoints: map[string]consumer.Position{"parent": {Sequence: "150"}}, Leases: []consumer.Lease{held.Lease}})
			require.NoError(t, err)
			cps, err := holder.Checkpoints(ctx)
			require.NoError(t, err)
			closed, err := holder.ClosedShards(ctx)
			require.NoError(t, err)
			t.Logf("re-seed renewed %v, lost %v; checkpoint now %v; closed %v", renewedShards(res), res.Lost, cps["parent"], closed)
			assert.Empty(t, res.Lost)
			assert.Equal(t, []string{"parent"}, renewedShards(res), "the holder wins the shard back")
			assert.Equal(t, consumer.Position{Sequence: "150"}, cps["parent"],
				"the holder's position replaces the one the newcomer reached from the forgotten record's start")
			assert.False(t, closed["parent"], "the newcomer's close is undone until the holder reads the shard to its end")
			_, err = holder.Renew(ctx, held.Lease)
			require.NoError(t, err, "the holder keeps reading the shard")
			require.NoError(t, holder.Commit(ctx, held.Lease, consumer.Position{Sequence: "160"}))
			cps, err = holder.Checkpoints(ctx)
			require.NoError(t, err)
			assert.Equal(t, consumer.Position{Sequence: "160"}, cps["parent"], "the holder's commits count again")
		})
	}
}

// The same when another holder re-seeds first (its record replaces the
// newcomer's), the newcomer then re-seeds the close it made into the kept
// record, and the newcomer, which knows the shard closed, writes the close
// back at its next balancing round: the paused holder still wins the shard
// back, and the newcomer's write-back does not close it under the holder.
//
// Guards: the newcomer's re-seeded close counted as done for the paused
// holder, and a close written back over a shard its holder reads.
func TestIntegrationReseedWinsBackAShardTheNewcomerClosedAfterAnotherHolderReseeded(t *testing.T) {
	t.Parallel()
	stores, red := forgetStores(t, 3, 30*time.Second)
	holder, other, newcomer := stores[0], stores[1], stores[2]
	ctx := t.Context()
	_, err := holder.Join(ctx)
	require.NoError(t, err)
	_, err = other.Join(ctx)
	require.NoError(t, err)
	held, err := holder.Acquire(ctx, "parent", "holder")
	require.NoError(t, err)
	require.NoError(t, holder.Commit(ctx, held.Lease, consumer.Position{Sequence: "100"}))
	otherHeld, err := other.Acquire(ctx, "shard-1", "other")
	require.NoError(t, err)

	c := red.Client()
	defer c.Close()
	require.NoError(t, c.FlushAll(ctx).Err())

	_, err = newcomer.Join(ctx)
	require.NoError(t, err)
	took, err := newcomer.Acquire(ctx, "parent", "newcomer")
	require.NoError(t, err)
	require.NoError(t, newcomer.CloseShard(ctx, took.Lease))

	_, err = other.Reseed(ctx, consumer.Seed{Owner: "other", Checkpoints: map[string]consumer.Position{}, Leases: []consumer.Lease{otherHeld.Lease}})
	require.NoError(t, err)
	// The newcomer's record lost to the one the other holder restored: its
	// re-seed carries the close it made.
	_, err = newcomer.Reseed(ctx, consumer.Seed{Owner: "newcomer", Checkpoints: map[string]consumer.Position{}, Closed: []string{"parent"}})
	require.NoError(t, err)

	res, err := holder.Reseed(ctx, consumer.Seed{Owner: "holder",
		Checkpoints: map[string]consumer.Position{"parent": {Sequence: "150"}}, Leases: []consumer.Lease{held.Lease}})
	require.NoError(t, err)
	cps, err := holder.Checkpoints(ctx)
	require.NoError(t, err)
	closed, err := holder.ClosedShards(ctx)
	require.NoError(t, err)
	t.Logf("re-seed renewed %v, lost %v; checkpoint now %v; closed %v", renewedShards(res), res.Lost, cps["parent"], closed)
	assert.Equal(t, []string{"parent"}, renewedShards(res), "the holder wins the shard back")
	assert.Equal(t, consumer.Position{Sequence: "150"}, cps["parent"])
	assert.False(t, closed["parent"])

	// The newcomer's balancing round finds the close it knows missing and
	// writes it back (writeBackClosed).
	_, err = newcomer.Reseed(ctx, consumer.Seed{Owner: "newcomer", Checkpoints: map[string]consumer.Position{}, Closed: []string{"parent"}})
	require.NoError(t, err)
	closed, err = holder.ClosedShards(ctx)
	require.NoError(t, err)
	assert.False(t, closed["parent"], "a close is not written over a shard its holder reads")
	require.NoError(t, holder.Commit(ctx, held.Lease, consumer.Position{Sequence: "160"}))
	require.NoError(t, holder.CloseShard(ctx, held.Lease), "the holder closes the shard at its end")
	closed, err = holder.ClosedShards(ctx)
	require.NoError(t, err)
	assert.True(t, closed["parent"])
}

// When another holder re-seeds first, the paused holder's renewal and
// commit of a shard the newcomer released meanwhile say the store forgot
// (so it re-seeds and wins the shard back), not that the lease was lost;
// no instance takes that shard before the holders had their time to
// re-seed; and the newcomer's later re-seed, under the record that lost,
// writes no position over the holder's.
//
// Guards: the holder's renewal found the newcomer's released lease and
// stopped its reader without a re-seed, and a member could take the shard
// at once from the newcomer's position.
func TestIntegrationPausedHolderFindsTheNewcomersLeaseUnsureAfterAnotherReseeded(t *testing.T) {
	t.Parallel()
	stores, red := forgetStores(t, 3, 30*time.Second)
	holder, other, newcomer := stores[0], stores[1], stores[2]
	ctx := t.Context()
	for _, s := range []*Store{holder, other} {
		_, err := s.Join(ctx)
		require.NoError(t, err)
	}
	held, err := holder.Acquire(ctx, "parent", "holder")
	require.NoError(t, err)
	require.NoError(t, holder.Commit(ctx, held.Lease, consumer.Position{Sequence: "100"}))
	otherHeld, err := other.Acquire(ctx, "shard-1", "other")
	require.NoError(t, err)

	c := red.Client()
	defer c.Close()
	require.NoError(t, c.FlushAll(ctx).Err())
	_, err = newcomer.Join(ctx)
	require.NoError(t, err)
	took, err := newcomer.Acquire(ctx, "parent", "newcomer")
	require.NoError(t, err)
	require.NoError(t, newcomer.Commit(ctx, took.Lease, consumer.Position{Sequence: "900"}))
	require.NoError(t, newcomer.Release(ctx, took.Lease))
	_, err = other.Reseed(ctx, consumer.Seed{Owner: "other", Checkpoints: map[string]consumer.Position{}, Leases: []consumer.Lease{otherHeld.Lease}})
	require.NoError(t, err)

	_, err = other.Acquire(ctx, "parent", "other")
	assert.ErrorIs(t, err, consumer.ErrLeaseHeld, "a member takes the newcomer's released shard before its holder re-seeded")
	_, err = holder.Renew(ctx, held.Lease)
	assert.ErrorIs(t, err, consumer.ErrStoreForgot, "the holder's renewal")
	assert.ErrorIs(t, holder.Commit(ctx, held.Lease, consumer.Position{Sequence: "150"}), consumer.ErrStoreForgot, "the holder's commit")

	res, err := holder.Reseed(ctx, consumer.Seed{Owner: "holder",
		Checkpoints: map[string]consumer.Position{"parent": {Sequence: "150"}}, Leases: []consumer.Lease{held.Lease}})
	require.NoError(t, err)
	assert.Equal(t, []string{"parent"}, renewedShards(res), "the holder wins the shard back")
	_, err = newcomer.Reseed(ctx, consumer.Seed{Owner: "newcomer", Checkpoints: map[string]consumer.Position{"parent": {Sequence: "950"}}})
	require.NoError(t, err)
	cps, err := holder.Checkpoints(ctx)
	require.NoError(t, err)
	assert.Equal(t, consumer.Position{Sequence: "150"}, cps["parent"], "the newcomer's position from the record that lost")
	_, err = holder.Renew(ctx, held.Lease)
	assert.NoError(t, err)
}

// The simulation's seed 1, schedule 3847, replayed with the seeds the
// coordinator builds: a holder wins back a shard the newcomer closed, a
// second wipe erases the group record's `reopened` list, and both re-seed
// again. The newcomer's record lost at its first re-seed, so it forgot the
// close it made (coordinator/reseed.go), and the holder's position stands.
//
// Guards the reading that the store writes a close back over a won-back
// shard after a second wipe: only a seed that kept a close learned under
// the lost record could, and the coordinator's does not.
func TestIntegrationSecondWipeKeepsAShardWonBackFromTheNewcomersClose(t *testing.T) {
	t.Parallel()
	stores, red := forgetStores(t, 2, 30*time.Second)
	holder, newcomer := stores[0], stores[1]
	ctx := t.Context()
	_, err := holder.Join(ctx)
	require.NoError(t, err)
	held, err := holder.Acquire(ctx, "parent", "holder")
	require.NoError(t, err)
	require.NoError(t, holder.Commit(ctx, held.Lease, consumer.Position{Sequence: "100"}))

	c := red.Client()
	defer c.Close()
	require.NoError(t, c.FlushAll(ctx).Err())
	_, err = newcomer.Join(ctx)
	require.NoError(t, err)
	took, err := newcomer.Acquire(ctx, "parent", "newcomer")
	require.NoError(t, err)
	require.NoError(t, newcomer.CloseShard(ctx, took.Lease))

	seed := consumer.Seed{Owner: "holder", Checkpoints: map[string]consumer.Position{"parent": {Sequence: "100"}}, Leases: []consumer.Lease{held.Lease}}
	res, err := holder.Reseed(ctx, seed)
	require.NoError(t, err)
	require.Equal(t, []string{"parent"}, renewedShards(res), "the holder wins the shard back")
	lost, err := newcomer.Reseed(ctx, consumer.Seed{Owner: "newcomer", Checkpoints: map[string]consumer.Position{}, Closed: []string{"parent"}})
	require.NoError(t, err)
	require.True(t, lost.RecordLost, "the newcomer's record loses to the holder's older one")

	require.NoError(t, c.FlushAll(ctx).Err())
	res, err = holder.Reseed(ctx, seed)
	require.NoError(t, err)
	require.Equal(t, []string{"parent"}, renewedShards(res))
	// The newcomer's seed after its record lost: the closes it knew are
	// forgotten, the store's closed set (without the parent) is what it
	// learned since.
	_, err = newcomer.Reseed(ctx, consumer.Seed{Owner: "newcomer", Checkpoints: map[string]consumer.Position{}})
	require.NoError(t, err)

	cps, err := holder.Checkpoints(ctx)
	require.NoError(t, err)
	closed, err := holder.ClosedShards(ctx)
	require.NoError(t, err)
	t.Logf("after the second wipe: checkpoint %v, closed %v", cps["parent"], closed)
	assert.Equal(t, consumer.Position{Sequence: "100"}, cps["parent"], "the holder's position stands: the records after it are read")
	assert.False(t, closed["parent"])
	require.NoError(t, holder.Commit(ctx, held.Lease, consumer.Position{Sequence: "160"}), "the holder reads on")
}
