package checkpointer

import (
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
