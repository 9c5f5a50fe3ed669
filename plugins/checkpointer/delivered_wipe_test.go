package checkpointer

import (
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/connect-kinesis/connect-kinesis/internal/consumer"
	"github.com/connect-kinesis/connect-kinesis/internal/testenv"
)

// A Redis that forgot the group (flushed, or restarted empty) loses the
// marks with everything else: the holder's write says so, and its re-seed
// writes back the marks it wrote, so the next owner of a shard still marks
// what was delivered before the wipe.
func TestIntegrationDeliveredMarkSurvivesAWipe(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name string
		wipe func(t *testing.T, red *testenv.Redis)
	}{
		{"flushed", func(t *testing.T, red *testenv.Redis) {
			c := red.Client()
			defer c.Close()
			require.NoError(t, c.FlushAll(t.Context()).Err())
		}},
		{"restarted empty", func(t *testing.T, red *testenv.Redis) {
			require.NoError(t, red.Restart(t.Context()))
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			stores, red := forgetStores(t, 2, 30*time.Second)
			holder, next := stores[0], stores[1]
			ctx := t.Context()
			for _, s := range stores {
				_, err := s.Join(ctx)
				require.NoError(t, err)
			}
			l0, l1 := mustAcquire(t, holder, "shard-0"), mustAcquire(t, holder, "shard-1")
			_, err := holder.WriteDelivered(ctx, "a", []DeliveredMark{mark(l0, pos(t, "100")), mark(l1, pos(t, "200/3"))})
			require.NoError(t, err)
			require.NoError(t, holder.Commit(ctx, l0, pos(t, "40")))

			tc.wipe(t, red)
			_, err = holder.WriteDelivered(ctx, "a", []DeliveredMark{mark(l0, pos(t, "150"))})
			require.ErrorIs(t, err, consumer.ErrStoreForgot, "a write to a store that forgot is never taken for done")

			_, err = holder.Reseed(ctx, consumer.Seed{Owner: "a", Checkpoints: map[string]consumer.Position{"shard-0": pos(t, "40")},
				Leases: []consumer.Lease{l0, l1}})
			require.NoError(t, err)
			got, err := holder.Delivered(ctx)
			require.NoError(t, err)
			assert.Equal(t, map[string]consumer.Position{"shard-0": pos(t, "100"), "shard-1": pos(t, "200/3")}, got,
				"the re-seed writes back the marks the holder wrote")

			// The holder goes on, hands shard-0 over; the next owner marks
			// what the holder delivered before and after the wipe.
			_, err = holder.WriteDelivered(ctx, "a", []DeliveredMark{mark(l0, pos(t, "150"))})
			require.NoError(t, err)
			require.NoError(t, holder.Release(ctx, l0))
			_, err = next.Reseed(ctx, consumer.Seed{Owner: "b"})
			require.NoError(t, err)
			take, err := next.AcquireMarked(ctx, "shard-0", "b")
			require.NoError(t, err)
			assert.Equal(t, pos(t, "150"), take.Delivered)
			assert.Equal(t, pos(t, "40"), take.Checkpoint)
		})
	}
}

// A mark that cannot be read gives the take back with the fix, as an
// unreadable checkpoint does: a reader that guessed could deliver records
// delivered before without the mark.
func TestIntegrationDeliveredMarkUnreadable(t *testing.T) {
	t.Parallel()
	r := testenv.NewRedis(t)
	s := joinedStore(t, backend{url: r.URL(), kind: KindSimple})
	c := r.Client()
	defer c.Close()
	require.NoError(t, c.HSet(t.Context(), s.Keys().Delivered, "shard-0", "12x").Err())
	_, err := s.AcquireMarked(t.Context(), "shard-0", "a")
	require.Error(t, err)
	for _, want := range []string{s.Keys().Delivered, "shard-0", "12x", "HSET"} {
		assert.Contains(t, err.Error(), want)
	}
	leases, err := s.Leases(t.Context())
	require.NoError(t, err)
	assert.Empty(t, leases["shard-0"].Owner, "the lease was given back")
}

// A holder that took a shard knows how far the earlier owner may have
// delivered it (the take read the mark) before it writes a mark of its own.
// If Redis forgets between the take and that first write, the holder's
// re-seed must write the mark it read back: otherwise it stores only its own
// lower marks, and the owner after it delivers the earlier owner's records
// unmarked. Soak seed 2 (1 h) found this: c19 delivered soak-b's shard 10
// up to counter 956 and was killed; a25 took the shard (mark 956), Redis
// was flushed, a25 re-seeded no mark, delivered one record (mark 948) and
// lost the shard; b24 then delivered 948's next record without the mark.
func TestIntegrationTakenMarkSurvivesAWipe(t *testing.T) {
	t.Parallel()
	stores, red := forgetStores(t, 3, 30*time.Second)
	gone, holder, next := stores[0], stores[1], stores[2]
	ctx := t.Context()
	for _, s := range stores {
		_, err := s.Join(ctx)
		require.NoError(t, err)
	}
	l0 := mustAcquire(t, gone, "shard-0")
	_, err := gone.WriteDelivered(ctx, "a", []DeliveredMark{mark(l0, pos(t, "956"))})
	require.NoError(t, err)
	require.NoError(t, gone.Commit(ctx, l0, pos(t, "940")))
	require.NoError(t, gone.Release(ctx, l0)) // as a lapse after a crash

	take, err := holder.AcquireMarked(ctx, "shard-0", "b")
	require.NoError(t, err)
	require.Equal(t, pos(t, "956"), take.Delivered)

	c := red.Client()
	defer c.Close()
	require.NoError(t, c.FlushAll(ctx).Err())
	_, err = holder.Reseed(ctx, consumer.Seed{Owner: "b", Checkpoints: map[string]consumer.Position{"shard-0": pos(t, "940")},
		Leases: []consumer.Lease{take.Lease}})
	require.NoError(t, err)
	got, err := holder.Delivered(ctx)
	require.NoError(t, err)
	assert.Equal(t, map[string]consumer.Position{"shard-0": pos(t, "956")}, got,
		"the re-seed writes back the mark the holder's take read")

	// The holder delivers one record and hands the shard over.
	_, err = holder.WriteDelivered(ctx, "b", []DeliveredMark{mark(take.Lease, pos(t, "948"))})
	require.NoError(t, err)
	require.NoError(t, holder.Release(ctx, take.Lease))
	_, err = next.Reseed(ctx, consumer.Seed{Owner: "c"})
	require.NoError(t, err)
	after, err := next.AcquireMarked(ctx, "shard-0", "c")
	require.NoError(t, err)
	assert.Equal(t, pos(t, "956"), after.Delivered, "the next owner marks every record the first owner delivered")
}

// A mark this store read at a take stays its own after it hands the shard
// on: when it takes the shard back from a store that forgot, and another
// instance re-seeded first (so this one wrote nothing back), the take
// still marks what the owner before it delivered. Before, the take read
// no mark, and the first owner's records came again unmarked (seed 4,
// 1 h: kpl-k0/1298 of soak-kpl's shard 6).
func TestIntegrationTakeRemembersTheMarkOfAnEarlierTake(t *testing.T) {
	t.Parallel()
	stores, red := joinedStores(t, 3)
	gone, taker, restorer := stores[0], stores[1], stores[2]
	ctx := t.Context()
	deliverAndHandOn(t, gone, "shard-6", "1439", "1297") // a5 dies; its lease lapses

	take, err := taker.AcquireMarked(ctx, "shard-6", "b")
	require.NoError(t, err)
	require.Equal(t, pos(t, "1439"), take.Delivered)
	require.NoError(t, taker.Release(ctx, take.Lease)) // handed on, unread

	c := red.Client()
	defer c.Close()
	require.NoError(t, c.FlushAll(ctx).Err())
	_, err = restorer.Reseed(ctx, consumer.Seed{Owner: "c"})
	require.NoError(t, err)

	// Shards the re-seed did not name wait a lease period for their
	// holders.
	var again MarkedTake
	require.Eventually(t, func() bool {
		again, err = taker.AcquireMarked(ctx, "shard-6", "b")
		return err == nil
	}, 5*time.Second, 50*time.Millisecond, "the take after the wait: %v", err)
	assert.Equal(t, pos(t, "1439"), again.Delivered, "the taker marks what the first owner delivered")
	other, err := restorer.AcquireMarked(ctx, "shard-5", "c")
	require.NoError(t, err)
	assert.True(t, other.Delivered.IsZero(), "a shard no store remembers has no mark: %v", other.Delivered)
}

// A member that remembers marks of shards it no longer holds writes them
// back at its next balancing round once it finds the store re-seeded by
// another instance: its own check runs only for streams it reads shards
// of, and the re-seed of the other instance restores that one's knowledge
// alone. Before, the marks were lost with the wipe, and a newcomer's take
// delivered the records they cover unmarked (seed 4, 1 h: 251 records of
// soak-dyn-1#5's shard 1). Both the round of one stream and the batched
// rounds write them back.
func TestIntegrationMarksOfAMemberWithNoShardSurviveAWipe(t *testing.T) {
	t.Parallel()
	for _, batched := range []bool{false, true} {
		t.Run(fmt.Sprintf("batched=%v", batched), func(t *testing.T) {
			t.Parallel()
			stores, red := joinedStores(t, 3)
			member, restorer, newcomer := stores[0], stores[1], stores[2]
			ctx := t.Context()
			deliverAndHandOn(t, member, "shard-1", "2095", "2067") // a holds no shard now
			read := func() {
				if batched {
					_, errs := member.ReadRounds(ctx, "a", []consumer.Store{member}, false)
					require.NoError(t, errs[0])
					return
				}
				_, err := member.ReadRound(ctx, "a")
				require.NoError(t, err)
			}
			read() // the round before the wipe sees no re-seed

			c := red.Client()
			defer c.Close()
			require.NoError(t, c.FlushAll(ctx).Err())
			_, err := restorer.Reseed(ctx, consumer.Seed{Owner: "b"})
			require.NoError(t, err)
			read()
			got, err := newcomer.Delivered(ctx)
			require.NoError(t, err)
			assert.Equal(t, map[string]consumer.Position{"shard-1": pos(t, "2095")}, got, "the member's mark is back")

			var take MarkedTake
			require.Eventually(t, func() bool {
				take, err = newcomer.AcquireMarked(ctx, "shard-1", "x")
				return err == nil
			}, 5*time.Second, 50*time.Millisecond)
			assert.Equal(t, pos(t, "2095"), take.Delivered, "the newcomer marks every record the member delivered")
		})
	}
}

// joinedStores are n stores of one group on one Redis (forgetStores, with
// a lease of a second), each joined.
func joinedStores(t *testing.T, n int) ([]*Store, *testenv.Redis) {
	t.Helper()
	stores, red := forgetStores(t, n, time.Second)
	for _, s := range stores {
		_, err := s.Join(t.Context())
		require.NoError(t, err)
	}
	return stores, red
}

// deliverAndHandOn has s (owner "a") take shard, store delivered as how
// far it delivered, commit committed and release the lease.
func deliverAndHandOn(t *testing.T, s *Store, shard, delivered, committed string) {
	t.Helper()
	ctx := t.Context()
	l := mustAcquire(t, s, shard)
	_, err := s.WriteDelivered(ctx, "a", []DeliveredMark{mark(l, pos(t, delivered))})
	require.NoError(t, err)
	require.NoError(t, s.Commit(ctx, l, pos(t, committed)))
	require.NoError(t, s.Release(ctx, l))
}

// A holder that stops while Redis is down leaves its lease to lapse; when
// Redis comes back empty before its stop is over, its Marker's WriteBack
// puts back the marks it wrote, which no running instance knows, so the
// shard's next owner still marks what the holder delivered (soak seed 9
// with efo: y2 stopped while Redis was down, Redis came back empty 5 s
// later, and a12 delivered soak-kpl's shard 5 again unmarked).
func TestIntegrationAStoppingHolderWritesItsMarksBackAfterAWipe(t *testing.T) {
	t.Parallel()
	stores, red := joinedStores(t, 2)
	holder, newcomer := stores[0], stores[1]
	ctx := t.Context()
	l := mustAcquire(t, holder, "shard-1")
	_, err := holder.WriteDelivered(ctx, "a", []DeliveredMark{mark(l, pos(t, "2095"))})
	require.NoError(t, err)
	marker := holder.Marks(ctx, "a")

	red.Stop()
	assert.Error(t, marker.WriteBack(ctx), "a write while Redis is down fails (the stop retries it)")
	require.NoError(t, red.Start(ctx))
	got, err := newcomer.Delivered(ctx)
	require.NoError(t, err)
	require.Empty(t, got, "Redis came back empty")

	require.NoError(t, marker.WriteBack(ctx))
	got, err = newcomer.Delivered(ctx)
	require.NoError(t, err)
	assert.Equal(t, map[string]consumer.Position{"shard-1": pos(t, "2095")}, got, "the holder's mark is back")
	// The running instance finds the store forgot, re-seeds what it knows
	// (nothing of shard-1) and takes the shard once the store lets it.
	_, err = newcomer.Reseed(ctx, consumer.Seed{Owner: "b"})
	require.NoError(t, err)
	var take MarkedTake
	require.Eventually(t, func() bool {
		take, err = newcomer.AcquireMarked(ctx, "shard-1", "b")
		return err == nil
	}, 10*time.Second, 50*time.Millisecond)
	assert.Equal(t, pos(t, "2095"), take.Delivered, "the next owner marks every record the holder delivered")

	// Written again over a store that kept it, the mark does not move.
	require.NoError(t, marker.WriteBack(ctx))
	got, err = newcomer.Delivered(ctx)
	require.NoError(t, err)
	assert.Equal(t, pos(t, "2095"), got["shard-1"])
}
