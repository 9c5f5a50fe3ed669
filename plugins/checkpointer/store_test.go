package checkpointer

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/redpanda-data/benthos/v4/public/service"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/connect-kinesis/connect-kinesis/internal/consumer"
	"github.com/connect-kinesis/connect-kinesis/internal/testenv"
)

// backend is a Redis the suite runs against.
type backend struct {
	url, kind string
}

func testConfig(b backend, group string) Config {
	cfg := DefaultConfig()
	cfg.RedisURL, cfg.RedisKind, cfg.Group = b.url, b.kind, group
	cfg.LeasePeriod = 300 * time.Millisecond
	return cfg
}

func newTestCheckpointer(t *testing.T, b backend, group string, mutate ...func(*Config)) *Checkpointer {
	t.Helper()
	cfg := testConfig(b, group)
	for _, m := range mutate {
		m(&cfg)
	}
	c, err := New(t.Context(), cfg, nil, nil)
	require.NoError(t, err)
	t.Cleanup(func() { _ = c.Close() })
	return c
}

// TestIntegrationStoreSingle and TestIntegrationStoreCluster run the same
// behaviours against one redis-server and a 3-node Redis Cluster: every
// script must keep its keys on one slot (no CROSSSLOT).
func TestIntegrationStoreSingle(t *testing.T) {
	r := testenv.NewRedis(t)
	runStoreSuite(t, backend{url: r.URL(), kind: KindSimple})
}

func TestIntegrationStoreCluster(t *testing.T) {
	c := testenv.NewRedisCluster(t)
	runStoreSuite(t, backend{url: c.URL(), kind: KindCluster})
}

func runStoreSuite(t *testing.T, b backend) {
	const stream = "arn:aws:kinesis:us-east-1:000000000000:stream/orders"
	// Each subtest gets its own group so they share the servers, not state.
	// Leases last long enough that a loaded machine cannot let one expire
	// mid-test, except in the tests about expiry, which use shortStore.
	store := func(t *testing.T) *Store {
		return newTestCheckpointer(t, b, t.Name(), func(c *Config) { c.LeasePeriod = 30 * time.Second }).Stream(stream)
	}
	shortStore := func(t *testing.T) *Store {
		return newTestCheckpointer(t, b, t.Name(), func(c *Config) { c.LeasePeriod = time.Second }).Stream(stream)
	}

	t.Run("a shard's own start comes with its take until it has a checkpoint", func(t *testing.T) {
		s := store(t)
		group := consumer.StartOverride{Mode: consumer.StartAtTimestamp, Timestamp: time.UnixMilli(1_700_000_000_000).UTC()}
		own := consumer.StartOverride{Mode: consumer.StartTrimHorizon}
		_, err := s.Reset(t.Context(), &group, map[string]consumer.Position{"shard-0": {Sequence: "5"}},
			map[string]consumer.StartOverride{"shard-1": own}, false)
		require.NoError(t, err)

		ck, err := s.Checkpoints(t.Context())
		require.NoError(t, err)
		assert.Equal(t, map[string]consumer.Position{"shard-0": {Sequence: "5"}}, ck, "starts are not checkpoints")
		starts, err := s.ShardStarts(t.Context())
		require.NoError(t, err)
		assert.Equal(t, map[string]consumer.StartOverride{"shard-1": own}, starts)

		take, err := s.Acquire(t.Context(), "shard-1", "a")
		require.NoError(t, err)
		require.NotNil(t, take.ShardStart)
		assert.Equal(t, own, *take.ShardStart)
		require.NotNil(t, take.Override)
		assert.Equal(t, group, *take.Override, "the group's override is kept apart")
		take, err = s.Acquire(t.Context(), "shard-2", "a")
		require.NoError(t, err)
		assert.Nil(t, take.ShardStart, "another shard has none")

		_, err = s.Reset(t.Context(), nil, nil, map[string]consumer.StartOverride{"shard-1": {Mode: consumer.StartLatest}}, true)
		assert.ErrorContains(t, err, "must be trim_horizon or at_timestamp")
	})

	t.Run("racing acquirers: exactly one wins", func(t *testing.T) {
		s := store(t)
		const n = 16
		var wg sync.WaitGroup
		var mu sync.Mutex
		var winners []consumer.Lease
		var held, other int
		for i := 0; i < n; i++ {
			wg.Add(1)
			go func(i int) {
				defer wg.Done()
				l, err := leaseOf(s.Acquire(t.Context(), "shardId-000000000000", fmt.Sprintf("instance-%d", i)))
				mu.Lock()
				defer mu.Unlock()
				switch {
				case err == nil:
					winners = append(winners, l)
				case errors.Is(err, consumer.ErrLeaseHeld):
					held++
				default:
					other++
					t.Errorf("unexpected error: %v", err)
				}
			}(i)
		}
		wg.Wait()
		require.Len(t, winners, 1)
		assert.Equal(t, n-1, held)
		assert.Equal(t, int64(1), winners[0].Token)
		leases, err := s.Leases(t.Context())
		require.NoError(t, err)
		assert.Equal(t, winners[0].Owner, leases["shardId-000000000000"].Owner)
		assert.False(t, leases["shardId-000000000000"].Expired)
	})

	t.Run("a take tells how long ago the shard's previous lease ended", func(t *testing.T) {
		s := shortStore(t)
		first, err := s.Acquire(t.Context(), "shard-0", "a")
		require.NoError(t, err)
		assert.Negative(t, first.Quiet, "no lease before: unknown")

		require.NoError(t, s.Release(t.Context(), first.Lease))
		time.Sleep(300 * time.Millisecond)
		second, err := s.Acquire(t.Context(), "shard-0", "b")
		require.NoError(t, err)
		assert.GreaterOrEqual(t, second.Quiet, 300*time.Millisecond, "released that long ago")
		assert.Less(t, second.Quiet, 10*time.Second)

		// b's lease (1 s) runs out: the next take counts from its expiry.
		require.Eventually(t, func() bool {
			ls, err := s.Leases(t.Context())
			return err == nil && ls["shard-0"].Expired
		}, 10*time.Second, 50*time.Millisecond)
		third, err := s.Acquire(t.Context(), "shard-0", "c")
		require.NoError(t, err)
		assert.GreaterOrEqual(t, third.Quiet, time.Duration(0))
		assert.Less(t, third.Quiet, 10*time.Second)

		leases, err := s.Leases(t.Context())
		require.NoError(t, err)
		assert.Equal(t, "c", leases["shard-0"].Owner)
		assert.Equal(t, third.Token, leases["shard-0"].Token)
	})

	t.Run("a recreated stream's state is cleared once, fencing its old readers and keeping the start", func(t *testing.T) {
		s1, s2 := store(t), store(t)
		start := consumer.StartOverride{Mode: consumer.StartAtTimestamp, Timestamp: time.UnixMilli(1_700_000_000_000).UTC()}
		_, err := s1.Reset(t.Context(), &start, nil, nil, false)
		require.NoError(t, err)
		reading, err := leaseOf(s1.Acquire(t.Context(), "shard-0", "a"))
		require.NoError(t, err)
		require.NoError(t, s1.Commit(t.Context(), reading, consumer.Position{Sequence: "100"}))
		closing, err := leaseOf(s1.Acquire(t.Context(), "shard-1", "a"))
		require.NoError(t, err)
		require.NoError(t, s1.CloseShard(t.Context(), closing))

		deleted, recreated := time.UnixMilli(1_700_000_000_000), time.UnixMilli(1_700_000_600_000)
		// The same stream, seen again: nothing changes.
		for range 2 {
			cleared, err := s1.StreamCreated(t.Context(), deleted, deleted)
			require.NoError(t, err)
			assert.False(t, cleared)
		}
		ck, err := s1.Checkpoints(t.Context())
		require.NoError(t, err)
		assert.Len(t, ck, 2)

		// Two instances find it recreated at once: one clears.
		var wg sync.WaitGroup
		results := make([]bool, 2)
		for i, s := range []*Store{s1, s2} {
			wg.Add(1)
			go func() {
				defer wg.Done()
				cleared, err := s.StreamCreated(t.Context(), deleted, recreated)
				assert.NoError(t, err)
				results[i] = cleared
			}()
		}
		wg.Wait()
		assert.ElementsMatch(t, []bool{true, false}, results, "exactly one caller clears")

		ck, err = s2.Checkpoints(t.Context())
		require.NoError(t, err)
		assert.Empty(t, ck, "the deleted stream's checkpoints are gone")
		closed, err := s2.ClosedShards(t.Context())
		require.NoError(t, err)
		assert.Empty(t, closed, "the deleted stream's closed shards are gone")
		kept, ok, err := s2.StartOverride(t.Context())
		require.NoError(t, err)
		assert.True(t, ok)
		assert.Equal(t, start, kept, "the group's start stays")
		// The old reader is fenced out; the shard is taken afresh.
		require.ErrorIs(t, s1.Commit(t.Context(), reading, consumer.Position{Sequence: "200"}), consumer.ErrLeaseLost)
		take, err := s2.Acquire(t.Context(), "shard-0", "b")
		require.NoError(t, err)
		assert.True(t, take.Checkpoint.IsZero())
		assert.Greater(t, take.Token, reading.Token)
		// A caller that still believes in the deleted stream changes nothing.
		cleared, err := s1.StreamCreated(t.Context(), deleted, recreated)
		require.NoError(t, err)
		assert.False(t, cleared)

		// A caller that saw the deleted incarnation (a listing from
		// before the re-creation) clears nothing of the new one: only a
		// later creation time clears.
		require.NoError(t, s2.Commit(t.Context(), take.Lease, consumer.Position{Sequence: "300"}))
		cleared, err = s1.StreamCreated(t.Context(), deleted, deleted)
		require.ErrorIs(t, err, consumer.ErrOlderStream)
		assert.False(t, cleared)
		ck, err = s2.Checkpoints(t.Context())
		require.NoError(t, err)
		assert.Equal(t, "300", ck["shard-0"].Sequence, "the new stream's checkpoint stays")
		cleared, err = s2.StreamCreated(t.Context(), recreated, recreated)
		require.NoError(t, err)
		assert.False(t, cleared, "the new creation time is still the group's")
	})

	t.Run("lease expires by redis time and the next owner gets a higher token", func(t *testing.T) {
		s := shortStore(t)
		a, err := leaseOf(s.Acquire(t.Context(), "shard-1", "a"))
		require.NoError(t, err)
		_, err = leaseOf(s.Acquire(t.Context(), "shard-1", "b"))
		require.ErrorIs(t, err, consumer.ErrLeaseHeld)
		// A take under the holder's own id is another process's under that
		// id: refused while the lease is live (issue 60, item 1).
		_, err = leaseOf(s.Acquire(t.Context(), "shard-1", "a"))
		require.ErrorIs(t, err, consumer.ErrLeaseHeld)

		var b consumer.Lease
		require.Eventually(t, func() bool {
			b, err = leaseOf(s.Acquire(t.Context(), "shard-1", "b"))
			return err == nil
		}, 5*time.Second, 20*time.Millisecond)
		assert.Greater(t, b.Token, a.Token)
		_, err = s.Renew(t.Context(), a)
		assert.ErrorIs(t, err, consumer.ErrLeaseLost)
		_, err = s.Renew(t.Context(), b)
		assert.NoError(t, err)
	})

	t.Run("renewal keeps a lease past its period", func(t *testing.T) {
		s := newTestCheckpointer(t, b, t.Name(), func(c *Config) { c.LeasePeriod = time.Second }).Stream(stream)
		a, err := leaseOf(s.Acquire(t.Context(), "shard-1", "a"))
		require.NoError(t, err)
		for i := 0; i < 6; i++ {
			time.Sleep(300 * time.Millisecond) // about a third of the period, as the input renews
			renewed, lost, err := s.RenewAll(t.Context(), "a", []consumer.Lease{a})
			require.NoError(t, err)
			require.Empty(t, lost)
			require.Len(t, renewed, 1)
			a = renewed[0]
		}
		_, err = leaseOf(s.Acquire(t.Context(), "shard-1", "b"))
		assert.ErrorIs(t, err, consumer.ErrLeaseHeld)
	})

	t.Run("renew all reports lost leases", func(t *testing.T) {
		s := store(t)
		a1, err := leaseOf(s.Acquire(t.Context(), "shard-1", "a"))
		require.NoError(t, err)
		a2, err := leaseOf(s.Acquire(t.Context(), "shard-2", "a"))
		require.NoError(t, err)
		require.NoError(t, s.Release(t.Context(), a2))
		_, err = leaseOf(s.Acquire(t.Context(), "shard-2", "b"))
		require.NoError(t, err)
		renewed, lost, err := s.RenewAll(t.Context(), "a", []consumer.Lease{a1, a2})
		require.NoError(t, err)
		assert.Equal(t, []string{"shard-2"}, lost)
		require.Len(t, renewed, 1)
		assert.Equal(t, "shard-1", renewed[0].Shard)
		assert.True(t, renewed[0].Deadline.After(time.Now()))
	})

	t.Run("stale owner's commit is rejected and the checkpoint never regresses", func(t *testing.T) {
		s := shortStore(t)
		a, err := leaseOf(s.Acquire(t.Context(), "shard-1", "a"))
		require.NoError(t, err)
		seq := func(v string) consumer.Position {
			p, err := consumer.ParsePosition(v)
			require.NoError(t, err)
			return p
		}
		require.NoError(t, s.Commit(t.Context(), a, seq("49590338271490256608559692538361571095921575989136588898")))
		// An older position (shorter number, and same number with a sub-record) is a no-op.
		require.NoError(t, s.Commit(t.Context(), a, seq("9999999999999999999999999999")))
		require.NoError(t, s.Commit(t.Context(), a, seq("49590338271490256608559692538361571095921575989136588898/3")))
		p, ok, err := s.Checkpoint(t.Context(), "shard-1")
		require.NoError(t, err)
		require.True(t, ok)
		assert.Equal(t, "49590338271490256608559692538361571095921575989136588898", p.String())

		require.Eventually(t, func() bool {
			_, err := leaseOf(s.Acquire(t.Context(), "shard-1", "b"))
			return err == nil
		}, 5*time.Second, 20*time.Millisecond)
		err = s.Commit(t.Context(), a, seq("49590338271490256608559692538361571095921575989136588999"))
		require.ErrorIs(t, err, consumer.ErrLeaseLost)
		p, _, err = s.Checkpoint(t.Context(), "shard-1")
		require.NoError(t, err)
		assert.Equal(t, "49590338271490256608559692538361571095921575989136588898", p.String())
		assert.ErrorIs(t, s.CloseShard(t.Context(), a), consumer.ErrLeaseLost)
		closed, err := s.ClosedShards(t.Context())
		require.NoError(t, err)
		assert.Empty(t, closed)
	})

	t.Run("sub-sequence checkpoints advance within an aggregated record", func(t *testing.T) {
		s := store(t)
		a, err := leaseOf(s.Acquire(t.Context(), "shard-1", "a"))
		require.NoError(t, err)
		for _, v := range []string{"100/0", "100/5", "100/2", "100", "100/9", "99"} {
			p, err := consumer.ParsePosition(v)
			require.NoError(t, err)
			require.NoError(t, s.Commit(t.Context(), a, p))
		}
		p, _, err := s.Checkpoint(t.Context(), "shard-1")
		require.NoError(t, err)
		assert.Equal(t, "100", p.String())
	})

	t.Run("hand-off request observed by the owner and completed", func(t *testing.T) {
		s := store(t)
		require.NoError(t, s.Heartbeat(t.Context(), "a"))
		require.NoError(t, s.Heartbeat(t.Context(), "b"))
		a, err := leaseOf(s.Acquire(t.Context(), "shard-1", "a"))
		require.NoError(t, err)
		_, err = leaseOf(s.Acquire(t.Context(), "shard-1", "b"))
		require.ErrorIs(t, err, consumer.ErrLeaseHeld)
		require.NoError(t, s.RequestHandoff(t.Context(), "shard-1", "b"))

		reqs, err := s.HandoffRequests(t.Context(), "a")
		require.NoError(t, err)
		assert.Equal(t, map[string]string{"shard-1": "b"}, reqs)
		reqs, err = s.HandoffRequests(t.Context(), "b")
		require.NoError(t, err)
		assert.Empty(t, reqs, "b holds nothing, so nothing is asked of it")

		p, _ := consumer.ParsePosition("42")
		require.NoError(t, s.Commit(t.Context(), a, p))
		require.NoError(t, s.Release(t.Context(), a))
		require.NoError(t, s.Release(t.Context(), a), "releasing twice is harmless")
		reqs, err = s.HandoffRequests(t.Context(), "a")
		require.NoError(t, err)
		assert.Empty(t, reqs)

		b, err := leaseOf(s.Acquire(t.Context(), "shard-1", "b"))
		require.NoError(t, err)
		assert.Greater(t, b.Token, a.Token)
		got, ok, err := s.Checkpoint(t.Context(), "shard-1")
		require.NoError(t, err)
		require.True(t, ok)
		assert.Equal(t, "42", got.String())
	})

	t.Run("a dead requester's hand-off request is dropped", func(t *testing.T) {
		s := shortStore(t)
		require.NoError(t, s.Heartbeat(t.Context(), "b"))
		_, err := leaseOf(s.Acquire(t.Context(), "shard-1", "a"))
		require.NoError(t, err)
		require.NoError(t, s.RequestHandoff(t.Context(), "shard-1", "b"))
		require.Eventually(t, func() bool {
			// Keep a's lease alive while b's heartbeat ages out.
			if _, err := s.Acquire(t.Context(), "shard-1", "a"); err != nil {
				return false
			}
			reqs, err := s.HandoffRequests(t.Context(), "a")
			return err == nil && len(reqs) == 0
		}, 5*time.Second, 50*time.Millisecond)
	})

	t.Run("closing a shard is atomic", func(t *testing.T) {
		s := store(t)
		require.NoError(t, s.Heartbeat(t.Context(), "b"))
		a, err := leaseOf(s.Acquire(t.Context(), "shard-1", "a"))
		require.NoError(t, err)
		require.NoError(t, s.RequestHandoff(t.Context(), "shard-1", "b"))
		require.NoError(t, s.CloseShard(t.Context(), a))

		p, ok, err := s.Checkpoint(t.Context(), "shard-1")
		require.NoError(t, err)
		require.True(t, ok)
		assert.True(t, p.ShardEnd)
		closed, err := s.ClosedShards(t.Context())
		require.NoError(t, err)
		assert.Equal(t, map[string]bool{"shard-1": true}, closed)
		leases, err := s.Leases(t.Context())
		require.NoError(t, err)
		assert.True(t, leases["shard-1"].Expired)
		assert.Empty(t, leases["shard-1"].Owner)
		n, err := s.c.client.HLen(t.Context(), s.keys.Handoff).Result()
		require.NoError(t, err)
		assert.Zero(t, n)
		// Nothing moves a closed shard's checkpoint back.
		a2, err := leaseOf(s.Acquire(t.Context(), "shard-1", "a"))
		require.NoError(t, err)
		old, _ := consumer.ParsePosition("7")
		require.NoError(t, s.Commit(t.Context(), a2, old))
		p, _, err = s.Checkpoint(t.Context(), "shard-1")
		require.NoError(t, err)
		assert.True(t, p.ShardEnd)
	})

	t.Run("members expire", func(t *testing.T) {
		s := shortStore(t)
		require.NoError(t, s.Heartbeat(t.Context(), "a"))
		require.NoError(t, s.Heartbeat(t.Context(), "b"))
		ms, err := s.LiveMembers(t.Context())
		require.NoError(t, err)
		assert.Equal(t, []string{"a", "b"}, ms)
		require.NoError(t, s.RemoveMember(t.Context(), "b"))
		require.Eventually(t, func() bool {
			ms, err := s.LiveMembers(t.Context())
			return err == nil && len(ms) == 0
		}, 5*time.Second, 20*time.Millisecond)
		n, err := s.c.client.ZCard(t.Context(), s.keys.Members).Result()
		require.NoError(t, err)
		assert.Zero(t, n, "dead members are pruned")
	})

	t.Run("no checkpoint is not an error", func(t *testing.T) {
		s := store(t)
		_, ok, err := s.Checkpoint(t.Context(), "shard-9")
		require.NoError(t, err)
		assert.False(t, ok)
		all, err := s.Checkpoints(t.Context())
		require.NoError(t, err)
		assert.Empty(t, all)
	})

	t.Run("progress: only the owner's shards, read back, gone with delete", func(t *testing.T) {
		s := store(t)
		has, err := s.HasState(t.Context())
		require.NoError(t, err)
		assert.False(t, has, "a group that never ran has no state")
		_, err = s.Acquire(t.Context(), "shard-1", "a|1")
		require.NoError(t, err)
		_, err = s.Acquire(t.Context(), "shard-2", "b")
		require.NoError(t, err)
		at := time.UnixMilli(1700000000123)
		require.NoError(t, s.PublishProgress(t.Context(), "a|1", map[string]consumer.Progress{
			"shard-1": {LagMillis: 1500, LastDelivered: at, BytesPerSecond: 4096},
			"shard-2": {LagMillis: 9}, // b's shard: not written
			"shard-3": {},             // nobody's: not written
		}))
		ps, err := s.Progress(t.Context())
		require.NoError(t, err)
		assert.Equal(t, map[string]PublishedProgress{
			"shard-1": {Progress: consumer.Progress{LagMillis: 1500, LastDelivered: at, BytesPerSecond: 4096}, Owner: "a|1", LoadKnown: true},
		}, ps)
		loads, err := s.ShardLoads(t.Context())
		require.NoError(t, err)
		assert.Equal(t, map[string]consumer.ShardLoad{"shard-1": {BytesPerSecond: 4096, Known: true}}, loads)
		// A value as the previous release wrote it, without the load: read
		// as before, with the load unknown (balancing then counts shards).
		require.NoError(t, s.c.client.HSet(t.Context(), s.Keys().Progress, "shard-2", "9|0|b|2").Err())
		ps, err = s.Progress(t.Context())
		require.NoError(t, err)
		assert.Equal(t, PublishedProgress{Progress: consumer.Progress{LagMillis: 9}, Owner: "b|2"}, ps["shard-2"])
		has, err = s.HasState(t.Context())
		require.NoError(t, err)
		assert.True(t, has)
		_, err = s.Delete(t.Context(), true)
		require.NoError(t, err)
		ps, err = s.Progress(t.Context())
		require.NoError(t, err)
		assert.Empty(t, ps)
	})

	forget := func(t *testing.T, s *Store) {
		k := s.Keys()
		require.NoError(t, s.c.client.Del(t.Context(), k.Checkpoints, k.Closed, k.Leases, k.Members, k.Handoff, k.Epoch).Err())
	}

	t.Run("a take returns the checkpoint and the group's start, the same for every instance", func(t *testing.T) {
		a := store(t)
		ta, err := a.Acquire(t.Context(), "shard-1", "a")
		require.NoError(t, err)
		assert.True(t, ta.Checkpoint.IsZero())
		assert.Nil(t, ta.Override)
		assert.WithinDuration(t, time.Now(), ta.GroupStart, 5*time.Second)
		require.NoError(t, a.Commit(t.Context(), ta.Lease, consumer.Position{Sequence: "100"}))
		require.NoError(t, a.Release(t.Context(), ta.Lease))

		b := newTestCheckpointer(t, b, t.Name(), func(c *Config) { c.LeasePeriod = 30 * time.Second }).Stream(stream)
		tb, err := b.Acquire(t.Context(), "shard-1", "b")
		require.NoError(t, err)
		assert.Equal(t, consumer.Position{Sequence: "100"}, tb.Checkpoint)
		assert.Equal(t, ta.GroupStart, tb.GroupStart, "the group's start is stored once")
	})

	t.Run("a store that forgot is told apart from a lost lease and re-seeded", func(t *testing.T) {
		a := store(t)
		ctx := t.Context()
		l1, err := a.Acquire(ctx, "shard-1", "a")
		require.NoError(t, err)
		l2, err := a.Acquire(ctx, "shard-2", "a")
		require.NoError(t, err)
		require.NoError(t, a.Commit(ctx, l1.Lease, consumer.Position{Sequence: "100"}))
		b := newTestCheckpointer(t, b, t.Name(), func(c *Config) { c.LeasePeriod = 30 * time.Second }).Stream(stream)
		l3, err := b.Acquire(ctx, "shard-3", "b")
		require.NoError(t, err)

		forget(t, a)
		for name, err := range map[string]error{
			"commit":  a.Commit(ctx, l1.Lease, consumer.Position{Sequence: "120"}),
			"release": a.Release(ctx, l2.Lease),
			"close":   a.CloseShard(ctx, l2.Lease),
		} {
			assert.ErrorIs(t, err, consumer.ErrStoreForgot, name)
			assert.NotErrorIs(t, err, consumer.ErrLeaseLost, name)
		}
		_, _, err = a.RenewAll(ctx, "a", []consumer.Lease{l1.Lease, l2.Lease})
		assert.ErrorIs(t, err, consumer.ErrStoreForgot)
		_, err = a.Acquire(ctx, "shard-9", "a")
		assert.ErrorIs(t, err, consumer.ErrStoreForgot)
		_, err = a.ClosedShards(ctx)
		assert.ErrorIs(t, err, consumer.ErrStoreForgot, "a forgetting store's empty closed set is not the group's")

		res, err := a.Reseed(ctx, consumer.Seed{
			Owner:       "a",
			Checkpoints: map[string]consumer.Position{"shard-1": {Sequence: "150"}},
			Closed:      []string{"shard-0"},
			Leases:      []consumer.Lease{l1.Lease, l2.Lease},
		})
		require.NoError(t, err)
		assert.Empty(t, res.FoundEpoch)
		assert.Equal(t, l1.GroupStart, res.GroupStart, "the group keeps its start")
		assert.Len(t, res.Renewed, 2)
		assert.Empty(t, res.Lost)
		// Leases keep their tokens, so commits already on their way count.
		require.NoError(t, a.Commit(ctx, l1.Lease, consumer.Position{Sequence: "160"}))
		cps, err := a.Checkpoints(ctx)
		require.NoError(t, err)
		assert.Equal(t, map[string]consumer.Position{"shard-0": {ShardEnd: true}, "shard-1": {Sequence: "160"}}, cps)
		closed, err := a.ClosedShards(ctx)
		require.NoError(t, err)
		assert.Equal(t, map[string]bool{"shard-0": true}, closed)

		// For a lease period after the re-seed, a shard the store does not
		// know is handed to nobody: its holder may still re-seed it.
		_, err = a.Acquire(ctx, "shard-3", "a")
		assert.ErrorIs(t, err, consumer.ErrLeaseHeld)
		// Its holder finds its lease unknown, and re-seeds it.
		_, _, err = b.RenewAll(ctx, "b", []consumer.Lease{l3.Lease})
		require.ErrorIs(t, err, consumer.ErrStoreForgot)
		res, err = b.Reseed(ctx, consumer.Seed{Owner: "b", Checkpoints: map[string]consumer.Position{"shard-1": {Sequence: "110"}}, Leases: []consumer.Lease{l3.Lease}})
		require.NoError(t, err)
		assert.Equal(t, res.Epoch, res.FoundEpoch, "a restored the group record already")
		assert.Len(t, res.Renewed, 1)
		p, _, err := a.Checkpoint(ctx, "shard-1")
		require.NoError(t, err)
		assert.Equal(t, consumer.Position{Sequence: "160"}, p, "a re-seed never moves a checkpoint back")
	})

	t.Run("a close can be run again after it succeeded, both steps", func(t *testing.T) {
		s := store(t)
		l, err := leaseOf(s.Acquire(t.Context(), "shard-1", "a"))
		require.NoError(t, err)
		require.NoError(t, s.CloseShard(t.Context(), l))
		// A close whose replicas did not acknowledge in time is retried:
		// its first step (the SHARD_END commit) and its second are no-ops.
		require.NoError(t, s.Commit(t.Context(), l, consumer.Position{ShardEnd: true}))
		require.NoError(t, s.CloseShard(t.Context(), l))
		assert.ErrorIs(t, s.Commit(t.Context(), l, consumer.Position{Sequence: "5"}), consumer.ErrLeaseLost, "but nothing else")
	})

	t.Run("of two group records after a forget, the earlier start wins", func(t *testing.T) {
		a := store(t)
		ctx := t.Context()
		la, err := a.Acquire(ctx, "shard-1", "a")
		require.NoError(t, err)
		forget(t, a)
		time.Sleep(5 * time.Millisecond)
		// An instance started after the forget creates a new record.
		c := newTestCheckpointer(t, b, t.Name(), func(c *Config) { c.LeasePeriod = 30 * time.Second }).Stream(stream)
		lc, err := c.Acquire(ctx, "shard-2", "c")
		require.NoError(t, err)
		require.True(t, lc.GroupStart.After(la.GroupStart))

		res, err := a.Reseed(ctx, consumer.Seed{Owner: "a", Leases: []consumer.Lease{la.Lease}})
		require.NoError(t, err)
		assert.NotEqual(t, res.Epoch, res.FoundEpoch)
		assert.Equal(t, la.GroupStart, res.GroupStart)
		// c finds the record replaced, re-seeds and adopts the earlier one.
		err = c.Commit(ctx, lc.Lease, consumer.Position{Sequence: "5"})
		require.ErrorIs(t, err, consumer.ErrStoreForgot)
		res2, err := c.Reseed(ctx, consumer.Seed{Owner: "c", Leases: []consumer.Lease{lc.Lease}})
		require.NoError(t, err)
		assert.Equal(t, res.Epoch, res2.Epoch)
		assert.Equal(t, la.GroupStart, res2.GroupStart)
		require.NoError(t, c.Commit(ctx, lc.Lease, consumer.Position{Sequence: "5"}))
	})

	t.Run("groups are independent", func(t *testing.T) {
		s1 := newTestCheckpointer(t, b, t.Name()+"-1").Stream(stream)
		s2 := newTestCheckpointer(t, b, t.Name()+"-2").Stream(stream)
		_, err := leaseOf(s1.Acquire(t.Context(), "shard-1", "a"))
		require.NoError(t, err)
		_, err = leaseOf(s2.Acquire(t.Context(), "shard-1", "b"))
		require.NoError(t, err)
	})
}

func TestIntegrationRedisRestartKeepsState(t *testing.T) {
	r := testenv.NewRedis(t, testenv.RedisOptions{AppendOnly: true})
	c := newTestCheckpointer(t, backend{url: r.URL(), kind: KindSimple}, "restart", func(c *Config) {
		c.LeasePeriod = 30 * time.Second // outlives the restart
	})
	s := c.Stream("orders")
	a, err := leaseOf(s.Acquire(t.Context(), "shard-1", "a"))
	require.NoError(t, err)
	p, _ := consumer.ParsePosition("12345678901234567890123")
	require.NoError(t, s.Commit(t.Context(), a, p))

	require.NoError(t, r.Restart(t.Context()))

	// The client reconnects by itself (and reloads the scripts, flushed by
	// the restart, through EVAL).
	require.Eventually(t, func() bool {
		_, err := s.Renew(t.Context(), a)
		return err == nil
	}, 10*time.Second, 50*time.Millisecond)
	got, ok, err := s.Checkpoint(t.Context(), "shard-1")
	require.NoError(t, err)
	require.True(t, ok)
	assert.Equal(t, p, got)
	p2, _ := consumer.ParsePosition("12345678901234567890124")
	require.NoError(t, s.Commit(t.Context(), a, p2))
	_, err = leaseOf(s.Acquire(t.Context(), "shard-1", "b"))
	assert.ErrorIs(t, err, consumer.ErrLeaseHeld)
}

func TestIntegrationRedisDownFailsFast(t *testing.T) {
	r := testenv.NewRedis(t)
	c := newTestCheckpointer(t, backend{url: r.URL(), kind: KindSimple}, "down")
	s := c.Stream("orders")
	a, err := leaseOf(s.Acquire(t.Context(), "shard-1", "a"))
	require.NoError(t, err)
	r.Stop()

	ctx, cancel := context.WithTimeout(t.Context(), 20*time.Second)
	defer cancel()
	_, ok, err := s.Checkpoint(ctx, "shard-1")
	require.Error(t, err, "a Redis error must never read as 'no checkpoint'")
	assert.False(t, ok)
	assert.Contains(t, err.Error(), "reading checkpoint of shard shard-1")
	assert.NotErrorIs(t, err, redis.Nil)
	assert.NoError(t, ctx.Err(), "the call failed before the deadline")

	p, _ := consumer.ParsePosition("1")
	err = s.Commit(ctx, a, p)
	require.Error(t, err)
	assert.NotErrorIs(t, err, consumer.ErrLeaseLost, "an outage is not a lost lease")
	_, err = s.Leases(ctx)
	require.Error(t, err)

	// Starting with Redis down fails in New, naming the field to fix.
	cfg := c.Config()
	_, err = New(ctx, cfg, nil, nil)
	require.Error(t, err)
	assert.Contains(t, err.Error(), "field checkpoint.redis.url: reaching Redis")
}

func TestIntegrationRedisACL(t *testing.T) {
	r := testenv.NewRedis(t, testenv.RedisOptions{ACLUser: "kinesis", ACLPassword: "s3cret-pw"})
	s := newTestCheckpointer(t, backend{url: r.URL(), kind: KindSimple}, "acl").Stream("orders")
	l, err := leaseOf(s.Acquire(t.Context(), "shard-1", "a"))
	require.NoError(t, err)
	p, _ := consumer.ParsePosition("5")
	require.NoError(t, s.Commit(t.Context(), l, p))

	// A wrong password fails in New and the error does not show it.
	cfg := testConfig(backend{url: "redis://kinesis:wrong-pw@" + r.Addr, kind: KindSimple}, "acl")
	_, err = New(t.Context(), cfg, nil, nil)
	require.Error(t, err)
	assert.NotContains(t, err.Error(), "wrong-pw")
}

func TestIntegrationRedisTLS(t *testing.T) {
	r := testenv.NewRedis(t, testenv.RedisOptions{TLS: true, Password: "tls-pw"})
	// The test CA is given through the config's tls fields, as a user would.
	spec := service.NewConfigSpec().Fields(Fields()...)
	yaml := fmt.Sprintf(`
checkpoint:
  redis:
    url: %s
    tls:
      enabled: true
      root_cas_file: %s
  group: tls
lease:
  period: 300ms
`, r.URL(), r.Certs.CA)
	parsed, err := spec.ParseYAML(yaml, nil)
	require.NoError(t, err)
	cfg, err := ConfigFromParsed(parsed)
	require.NoError(t, err)
	require.NotNil(t, cfg.TLS)
	c, err := New(t.Context(), cfg, nil, nil)
	require.NoError(t, err)
	t.Cleanup(func() { _ = c.Close() })
	s := c.Stream("orders")
	l, err := leaseOf(s.Acquire(t.Context(), "shard-1", "a"))
	require.NoError(t, err)
	require.NoError(t, s.CloseShard(t.Context(), l))
	closed, err := s.ClosedShards(t.Context())
	require.NoError(t, err)
	assert.True(t, closed["shard-1"])

	// Without the CA the server is not trusted.
	cfg.TLS = nil
	_, err = New(t.Context(), cfg, nil, nil)
	require.Error(t, err)
}

func TestIntegrationRedisFrozenFailsFast(t *testing.T) {
	r := testenv.NewRedis(t)
	s := newTestCheckpointer(t, backend{url: r.URL(), kind: KindSimple}, "frozen").Stream("orders")
	l, err := leaseOf(s.Acquire(t.Context(), "shard-1", "a"))
	require.NoError(t, err)
	require.NoError(t, r.Pause())
	t.Cleanup(func() { _ = r.Resume() })

	// A frozen server answers nothing: the call must end on the client's
	// own read timeout, well before the caller's deadline.
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	defer cancel()
	_, _, err = s.RenewAll(ctx, "a", []consumer.Lease{l})
	require.Error(t, err)
	assert.NotErrorIs(t, err, context.DeadlineExceeded)
	assert.NoError(t, ctx.Err())

	require.NoError(t, r.Resume())
	require.Eventually(t, func() bool {
		_, _, err := s.Checkpoint(t.Context(), "shard-1")
		return err == nil
	}, 10*time.Second, 50*time.Millisecond)
}

// leaseOf keeps the lease of a take.
func leaseOf(t consumer.Take, err error) (consumer.Lease, error) { return t.Lease, err }
