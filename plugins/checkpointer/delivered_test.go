package checkpointer

import (
	"context"
	"fmt"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/connect-kinesis/connect-kinesis/internal/consumer"
	"github.com/connect-kinesis/connect-kinesis/internal/testenv"
)

// The redelivery mark's store on one redis-server and on a Cluster (every
// script keeps to the group's slot).
func TestIntegrationDeliveredMarkSingle(t *testing.T) {
	t.Parallel()
	r := testenv.NewRedis(t)
	runDeliveredMark(t, backend{url: r.URL(), kind: KindSimple})
}

func TestIntegrationDeliveredMarkCluster(t *testing.T) {
	t.Parallel()
	c := testenv.NewRedisCluster(t)
	runDeliveredMark(t, backend{url: c.URL(), kind: KindCluster})
}

func pos(t *testing.T, s string) consumer.Position {
	t.Helper()
	p, err := consumer.ParsePosition(s)
	require.NoError(t, err)
	return p
}

func joinedStore(t *testing.T, b backend) *Store {
	t.Helper()
	s := newTestCheckpointer(t, b, t.Name(), func(c *Config) { c.LeasePeriod = 30 * time.Second }).
		Stream("arn:aws:kinesis:us-east-1:000000000000:stream/orders")
	_, err := s.Join(t.Context())
	require.NoError(t, err)
	return s
}

func marked(t *testing.T, s *Store, shard, owner string) MarkedTake {
	t.Helper()
	m, err := s.AcquireMarked(t.Context(), shard, owner)
	require.NoError(t, err)
	return m
}

func mark(l consumer.Lease, p consumer.Position) DeliveredMark {
	return DeliveredMark{Shard: l.Shard, Token: l.Token, Position: p}
}

func runDeliveredMark(t *testing.T, b backend) {
	// 2^128 - 1 and a shorter number: compared as big integers.
	const big, small = "340282366920938463463374607431768211455", "99999999999999999999"

	t.Run("an owner that lost the shard cannot move its mark, and the next take reads it", func(t *testing.T) {
		s := joinedStore(t, b)
		ctx := t.Context()
		a := marked(t, s, "shard-0", "a")
		assert.True(t, a.Delivered.IsZero(), "nothing delivered yet")
		fenced, err := s.WriteDelivered(ctx, "a", []DeliveredMark{mark(a.Lease, pos(t, "100"))})
		require.NoError(t, err)
		assert.Empty(t, fenced)

		// Another instance writing for a shard it does not hold is fenced.
		fenced, err = s.WriteDelivered(ctx, "b", []DeliveredMark{{Shard: "shard-0", Token: a.Token, Position: pos(t, "500")}})
		require.NoError(t, err)
		assert.Equal(t, []string{"shard-0"}, fenced)

		// An owner id that holds '|' is not taken for a shorter one.
		pipe := marked(t, s, "shard-9", "a|1")
		fenced, err = s.WriteDelivered(ctx, "a", []DeliveredMark{{Shard: "shard-9", Token: pipe.Token, Position: pos(t, "500")}})
		require.NoError(t, err)
		assert.Equal(t, []string{"shard-9"}, fenced)
		fenced, err = s.WriteDelivered(ctx, "a|1", []DeliveredMark{mark(pipe.Lease, pos(t, "500"))})
		require.NoError(t, err)
		assert.Empty(t, fenced)

		require.NoError(t, s.Release(ctx, a.Lease))
		b2 := marked(t, s, "shard-0", "b")
		assert.Equal(t, pos(t, "100"), b2.Delivered, "the take reads how far the earlier owner delivered")
		// The earlier owner, still running with its old token, is fenced
		// out: it cannot deliver past what the take read.
		fenced, err = s.WriteDelivered(ctx, "a", []DeliveredMark{mark(a.Lease, pos(t, "200"))})
		require.NoError(t, err)
		assert.Equal(t, []string{"shard-0"}, fenced)
		got, err := s.Delivered(ctx)
		require.NoError(t, err)
		assert.Equal(t, map[string]consumer.Position{"shard-0": pos(t, "100"), "shard-9": pos(t, "500")}, got)
	})

	t.Run("a mark never moves back", func(t *testing.T) {
		s := joinedStore(t, b)
		ctx := t.Context()
		l := marked(t, s, "shard-0", "a").Lease
		for _, p := range []string{small + "/2", small, small + "/5", "5", big, small} {
			_, err := s.WriteDelivered(ctx, "a", []DeliveredMark{mark(l, pos(t, p))})
			require.NoError(t, err)
		}
		got, err := s.Delivered(ctx)
		require.NoError(t, err)
		assert.Equal(t, pos(t, big), got["shard-0"])
		n, err := s.RestoreDelivered(ctx, map[string]consumer.Position{"shard-0": pos(t, small), "shard-1": pos(t, "7")})
		require.NoError(t, err)
		assert.Equal(t, 1, n, "a restore only moves marks forwards")
		got, err = s.Delivered(ctx)
		require.NoError(t, err)
		assert.Equal(t, map[string]consumer.Position{"shard-0": pos(t, big), "shard-1": pos(t, "7")}, got)
	})

	t.Run("a reset and a recreated stream keep the marks; prune and delete remove them", func(t *testing.T) {
		s := joinedStore(t, b)
		ctx := t.Context()
		l0, l1 := marked(t, s, "shard-0", "a").Lease, marked(t, s, "shard-1", "a").Lease
		_, err := s.WriteDelivered(ctx, "a", []DeliveredMark{mark(l0, pos(t, "10")), mark(l1, pos(t, "20"))})
		require.NoError(t, err)
		_, err = s.Reset(ctx, &consumer.StartOverride{Mode: consumer.StartTrimHorizon}, nil, nil, true)
		require.NoError(t, err)
		again := marked(t, s, "shard-0", "a")
		assert.Equal(t, pos(t, "10"), again.Delivered, "records read again after a rewind were delivered before")

		require.NoError(t, s.Release(ctx, again.Lease))
		pruned, err := s.Prune(ctx, []string{"shard-0"})
		require.NoError(t, err)
		assert.Equal(t, []string{"shard-0"}, pruned)
		got, err := s.Delivered(ctx)
		require.NoError(t, err)
		assert.Equal(t, map[string]consumer.Position{"shard-1": pos(t, "20")}, got)
		assert.NotContains(t, s.marks.snapshot(), "shard-0", "a pruned shard is not re-seeded")

		cleared, err := s.StreamCreated(ctx, time.UnixMilli(1000), time.UnixMilli(2000))
		require.NoError(t, err)
		require.True(t, cleared)
		got, err = s.Delivered(ctx)
		require.NoError(t, err)
		assert.Equal(t, map[string]consumer.Position{"shard-1": pos(t, "20")}, got,
			"a recreated stream keeps the marks: they may be of its own records, read under the deleted one's creation time")
		assert.Contains(t, s.marks.snapshot(), "shard-1", "and its re-seed writes them back")

		l2 := marked(t, s, "shard-2", "a").Lease
		_, err = s.WriteDelivered(ctx, "a", []DeliveredMark{mark(l2, pos(t, "30"))})
		require.NoError(t, err)
		require.NoError(t, s.c.client.ZRem(ctx, s.keys.Members, "a").Err())
		_, err = s.Delete(ctx, true)
		require.NoError(t, err)
		n, err := s.c.client.Exists(ctx, s.keys.Delivered).Result()
		require.NoError(t, err)
		assert.Zero(t, n, "delete removes the marks with the group's other keys")
	})
}

// roundTrips counts the script calls and pipelines a client sends (not the
// INFO replication the store sends every 30 s to learn of replicas).
type roundTrips struct{ n atomic.Int64 }

func (r *roundTrips) DialHook(next redis.DialHook) redis.DialHook { return next }
func (r *roundTrips) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		if cmd.Name() != "info" {
			r.n.Add(1)
		}
		return next(ctx, cmd)
	}
}
func (r *roundTrips) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return func(ctx context.Context, cmds []redis.Cmder) error {
		r.n.Add(1)
		return next(ctx, cmds)
	}
}

// One owner's marks for 256 shards cost one round trip, and a take reads
// its mark in the take's own round trip.
func TestIntegrationDeliveredMarkOneRoundTrip(t *testing.T) {
	t.Parallel()
	r := testenv.NewRedis(t)
	s := joinedStore(t, backend{url: r.URL(), kind: KindSimple})
	ctx := t.Context()
	marks := make([]DeliveredMark, 256)
	for i := range marks {
		m := marked(t, s, fmt.Sprintf("shardId-%012d", i), "a")
		marks[i] = mark(m.Lease, pos(t, fmt.Sprintf("4959%d", i)))
	}
	// Loaded once, so that EVALSHA is not answered NOSCRIPT (EVAL follows).
	_, err := s.WriteDelivered(ctx, "a", marks[:1])
	require.NoError(t, err)

	var rt roundTrips
	s.c.client.AddHook(&rt)
	fenced, err := s.WriteDelivered(ctx, "a", marks)
	require.NoError(t, err)
	assert.Empty(t, fenced)
	assert.EqualValues(t, 1, rt.n.Load(), "one call for 256 shards")
	got, err := s.Delivered(ctx)
	require.NoError(t, err)
	assert.Len(t, got, 256)

	require.NoError(t, s.Commit(ctx, marks[0].lease(), pos(t, "4959")))
	require.NoError(t, s.Release(ctx, marks[0].lease()))
	rt.n.Store(0)
	m := marked(t, s, marks[0].Shard, "b")
	assert.EqualValues(t, 1, rt.n.Load(), "the mark comes with the take")
	assert.Equal(t, pos(t, "49590"), m.Delivered)
	assert.Equal(t, pos(t, "4959"), m.Checkpoint)
}

func (m DeliveredMark) lease() consumer.Lease {
	return consumer.Lease{Shard: m.Shard, Owner: "a", Token: m.Token}
}

// More shards than one script may unpack go in calls of maxMarksPerCall.
func TestIntegrationDeliveredMarkManyShards(t *testing.T) {
	t.Parallel()
	r := testenv.NewRedis(t)
	s := joinedStore(t, backend{url: r.URL(), kind: KindSimple})
	ctx := t.Context()
	marks := make([]DeliveredMark, maxMarksPerCall+500)
	for i := range marks {
		m := marked(t, s, fmt.Sprintf("shardId-%012d", i), "a")
		marks[i] = mark(m.Lease, pos(t, fmt.Sprintf("4959%d", i)))
	}
	_, err := s.WriteDelivered(ctx, "a", marks[:1])
	require.NoError(t, err)
	var rt roundTrips
	s.c.client.AddHook(&rt)
	fenced, err := s.WriteDelivered(ctx, "a", marks)
	require.NoError(t, err)
	assert.Empty(t, fenced)
	assert.EqualValues(t, 2, rt.n.Load())
	got, err := s.Delivered(ctx)
	require.NoError(t, err)
	assert.Len(t, got, len(marks))
}
