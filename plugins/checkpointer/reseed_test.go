package checkpointer

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/connect-kinesis/connect-kinesis/internal/consumer"
)

func renewedShards(res consumer.Reseeded) []string {
	var out []string
	for _, l := range res.Renewed {
		out = append(out, l.Shard)
	}
	return out
}

// A process paused past its lease whose shard another instance took
// (a newer token) may re-seed first once Redis comes back empty: the
// newer holder's re-seed then wins, and the paused one is fenced.
func TestIntegrationReseedKeepsTheNewerToken(t *testing.T) {
	t.Parallel()
	stores, red := forgetStores(t, 2, 30*time.Second)
	p, q := stores[0], stores[1]
	ctx := t.Context()
	for _, s := range stores {
		_, err := s.Join(ctx)
		require.NoError(t, err)
	}
	old := mustAcquire(t, p, "shard-0")
	// p's lease ended (here released; expired alike) and q took the shard.
	require.NoError(t, p.Release(ctx, old))
	newer, err := q.Acquire(ctx, "shard-0", "q")
	require.NoError(t, err)
	require.Greater(t, newer.Token, old.Token)

	c := red.Client()
	defer c.Close()
	require.NoError(t, c.FlushAll(ctx).Err())

	res, err := p.Reseed(ctx, consumer.Seed{Owner: "a", Leases: []consumer.Lease{old}})
	require.NoError(t, err)
	assert.Equal(t, []string{"shard-0"}, renewedShards(res), "the store cannot tell yet: it knows no newer token")
	res, err = q.Reseed(ctx, consumer.Seed{Owner: "q", Leases: []consumer.Lease{newer.Lease}})
	require.NoError(t, err)
	assert.Equal(t, []string{"shard-0"}, renewedShards(res), "the newer token's holder keeps the shard")
	assert.Empty(t, res.Lost)
	_, err = p.Renew(ctx, old)
	assert.ErrorIs(t, err, consumer.ErrLeaseLost, "the older token is fenced")
	assert.ErrorIs(t, p.Commit(ctx, old, consumer.Position{Sequence: "7"}), consumer.ErrLeaseLost)
	require.NoError(t, q.Commit(ctx, newer.Lease, consumer.Position{Sequence: "9"}))

	// The other order: the older token comes second and is refused.
	res, err = p.Reseed(ctx, consumer.Seed{Owner: "a", Leases: []consumer.Lease{old}})
	require.NoError(t, err)
	assert.Equal(t, []string{"shard-0"}, res.Lost)
	assert.Empty(t, res.Renewed)
}

// A re-seed restores no lease its reader already released or closed, and
// never takes a closed shard out of the closed set or gives it back a
// position: neither when the store kept the lease (only the group record
// was replaced) nor when it forgot everything.
func TestIntegrationReseedRestoresNoFinishedLease(t *testing.T) {
	t.Parallel()
	stores, red := forgetStores(t, 1, 30*time.Second)
	s := stores[0]
	ctx := t.Context()
	_, err := s.Join(ctx)
	require.NoError(t, err)
	released := mustAcquire(t, s, "shard-r")
	require.NoError(t, s.Commit(ctx, released, consumer.Position{Sequence: "5"}))
	require.NoError(t, s.Release(ctx, released))
	closed := mustAcquire(t, s, "shard-c")
	require.NoError(t, s.Commit(ctx, closed, consumer.Position{Sequence: "99"}))
	require.NoError(t, s.CloseShard(ctx, closed))
	c := red.Client()
	defer c.Close()

	check := func(t *testing.T, res consumer.Reseeded) {
		t.Helper()
		assert.Empty(t, res.Renewed, "a released or closed lease is not taken again")
		leases, err := s.Leases(ctx)
		require.NoError(t, err)
		for _, id := range []string{"shard-r", "shard-c"} {
			if l, ok := leases[id]; ok {
				assert.True(t, l.Expired, "%s: %+v", id, l)
			}
		}
		cps, err := s.Checkpoints(ctx)
		require.NoError(t, err)
		assert.Equal(t, consumer.Position{ShardEnd: true}, cps["shard-c"], "a closed shard stays at its end")
		set, err := s.ClosedShards(ctx)
		require.NoError(t, err)
		assert.True(t, set["shard-c"], "a closed shard stays closed")
	}
	seed := consumer.Seed{
		Owner:       "a",
		Checkpoints: map[string]consumer.Position{"shard-r": {Sequence: "5"}, "shard-c": {Sequence: "99"}},
		Leases:      []consumer.Lease{released, closed},
	}

	t.Run("record replaced", func(t *testing.T) {
		// The store kept the state and lost only the group record, which a
		// newcomer made anew: the kept state is taken for the newcomer's
		// (provisional), so the seed's own closes settle it. The instance
		// seeds the close its reader made (known.closed), as here; a lease
		// it released itself and still presents (its reader finished while
		// the seed was sent) is won back with its position: a re-read.
		require.NoError(t, c.HSet(ctx, s.Keys().Epoch, "id", "other", "start", time.Now().Add(time.Hour).UnixMilli()).Err())
		seed := seed
		seed.Leases = []consumer.Lease{closed}
		seed.Closed = []string{"shard-c"}
		res, err := s.Reseed(ctx, seed)
		require.NoError(t, err)
		check(t, res)
	})

	t.Run("store forgot everything", func(t *testing.T) {
		require.NoError(t, c.FlushAll(ctx).Err())
		seed := seed
		seed.Closed = []string{"shard-c"}
		res, err := s.Reseed(ctx, seed)
		require.NoError(t, err)
		assert.NotContains(t, renewedShards(res), "shard-c", "a shard the seed names closed gets no lease")
		cps, err := s.Checkpoints(ctx)
		require.NoError(t, err)
		assert.Equal(t, consumer.Position{ShardEnd: true}, cps["shard-c"])
		leases, err := s.Leases(ctx)
		require.NoError(t, err)
		if l, ok := leases["shard-c"]; ok {
			assert.True(t, l.Expired, "the lease of a shard the seed names closed is not restored: %+v", l)
		}
	})
}

// TestIntegrationLostRecordReseedKeepsTheEarliestPosition guards "lost-record
// skip" after two wipes: a holder of the middle group record (neither the
// kept one nor the newcomer's) re-seeds a shard the newcomer read from its
// later start; its record loses, but its earlier position must replace the
// newcomer's provisional one, and a re-seed whose record lost neither
// writes a position into a shard the store does not know nor keeps its
// lease (simulation seed 2, schedule 2548).
func TestIntegrationLostRecordReseedKeepsTheEarliestPosition(t *testing.T) {
	t.Parallel()
	stores, red := forgetStores(t, 3, 30*time.Second)
	kept, middle, newcomer := stores[0], stores[1], stores[2]
	ctx := t.Context()
	_, err := kept.Join(ctx)
	require.NoError(t, err)
	keptHeld, err := kept.Acquire(ctx, "other", "kept")
	require.NoError(t, err)

	c := red.Client()
	defer c.Close()
	require.NoError(t, c.FlushAll(ctx).Err())
	_, err = middle.Join(ctx)
	require.NoError(t, err)
	mid, err := middle.Acquire(ctx, "shard", "middle")
	require.NoError(t, err)
	require.NoError(t, middle.Commit(ctx, mid.Lease, consumer.Position{Sequence: "200"}))

	require.NoError(t, c.FlushAll(ctx).Err())
	_, err = newcomer.Join(ctx)
	require.NoError(t, err)
	took, err := newcomer.Acquire(ctx, "shard", "newcomer")
	require.NoError(t, err)
	require.NoError(t, newcomer.Commit(ctx, took.Lease, consumer.Position{Sequence: "900"}))

	_, err = kept.Reseed(ctx, consumer.Seed{Owner: "kept", Checkpoints: map[string]consumer.Position{}, Leases: []consumer.Lease{keptHeld.Lease}})
	require.NoError(t, err)
	res, err := middle.Reseed(ctx, consumer.Seed{Owner: "middle",
		Checkpoints: map[string]consumer.Position{"shard": {Sequence: "200"}, "unknown": {Sequence: "700"}},
		Leases:      []consumer.Lease{mid.Lease, {Shard: "unknown", Owner: "middle", Token: 1}}})
	require.NoError(t, err)
	require.True(t, res.RecordLost, "the middle record loses to the kept, earlier one")
	assert.ElementsMatch(t, []string{"shard", "unknown"}, res.Lost,
		"a holder whose record lost keeps no lease of a shard the store did not know: its reader would read on from its later position")
	cps, err := kept.Checkpoints(ctx)
	require.NoError(t, err)
	assert.Equal(t, consumer.Position{Sequence: "200"}, cps["shard"], "the shard's position after the middle holder's re-seed")
	_, ok := cps["unknown"]
	assert.False(t, ok, "a re-seed whose record lost wrote a position into a shard the store did not know: %v", cps["unknown"])
}
