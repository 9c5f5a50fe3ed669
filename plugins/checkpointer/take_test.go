package checkpointer

import (
	"bytes"
	"log/slog"
	"sync"
	"testing"
	"time"

	"github.com/redpanda-data/benthos/v4/public/service"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/connect-kinesis/connect-kinesis/internal/consumer"
	"github.com/connect-kinesis/connect-kinesis/internal/testenv"
)

// syncBuffer is a log sink the store's goroutines may write to.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// A take whose checkpoint, start override or shard start cannot be read
// gives the lease back at once (a held lease nobody reads would keep the
// shard unread), and logs an ERROR naming the key, field and value and the
// command that fixes it.
func TestIntegrationAcquireReleasesOnAMalformedValue(t *testing.T) {
	t.Parallel()
	red := testenv.NewRedis(t)
	c := red.Client()
	defer c.Close()
	for _, tc := range []struct{ name, field, value string }{
		{"checkpoint", "shard-0", "not-a-sequence"},
		{"start override", startField, "yesterday"},
		{"shard start", shardStartPrefix + "shard-0", "at_timestamp=soon"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var logs syncBuffer
			cfg := DefaultConfig()
			cfg.RedisURL, cfg.Group, cfg.LeasePeriod = red.URL(), t.Name(), 30*time.Second
			log := service.NewLoggerFromSlog(slog.New(slog.NewTextHandler(&logs, nil)))
			cp, err := New(t.Context(), cfg, log, nil)
			require.NoError(t, err)
			t.Cleanup(func() { _ = cp.Close() })
			s := cp.Stream("arn:aws:kinesis:us-east-1:000000000000:stream/s")
			_, err = s.Join(t.Context())
			require.NoError(t, err)
			require.NoError(t, c.HSet(t.Context(), s.Keys().Checkpoints, tc.field, tc.value).Err())

			_, err = s.Acquire(t.Context(), "shard-0", "a")
			require.Error(t, err)
			for _, want := range []string{s.Keys().Checkpoints, tc.field, tc.value, "checkpoints reset"} {
				assert.Contains(t, err.Error(), want)
			}
			leases, err := s.Leases(t.Context())
			require.NoError(t, err)
			assert.True(t, leases["shard-0"].Expired, "the lease is given back: %+v", leases["shard-0"])
			out := logs.String()
			assert.Contains(t, out, "level=ERROR")
			assert.Contains(t, out, tc.value)
			assert.Contains(t, out, "checkpoints reset")
		})
	}
}

// A balancing round takes many shards in one call (AcquireMany): each
// shard is taken exactly as Acquire would take it alone, with its holder,
// checkpoint, start and token, in one round trip; a shard whose stored
// value cannot be read is given back and named, and the batch's other
// takes stand. Guards the batched take of issue 61's 10,000-shard start,
// where one call a shard let each round's deadline pass after about a
// hundred takes.
func TestIntegrationAcquireManyTakesEachShardAsAcquireWould(t *testing.T) {
	t.Parallel()
	red := testenv.NewRedis(t)
	c := red.Client()
	defer c.Close()
	cp, hook := countedCheckpointer(t, red.URL(), t.Name())
	s := cp.Stream("arn:aws:kinesis:us-east-1:000000000000:stream/s")
	ctx := t.Context()
	_, err := s.Join(ctx)
	require.NoError(t, err)
	_, err = s.Acquire(ctx, "held", "b")
	require.NoError(t, err)
	ck, err := s.Acquire(ctx, "committed", "b")
	require.NoError(t, err)
	require.NoError(t, s.Commit(ctx, ck.Lease, consumer.Position{Sequence: "4200"}))
	require.NoError(t, s.Release(ctx, ck.Lease))
	require.NoError(t, c.HSet(ctx, s.Keys().Checkpoints, shardStartPrefix+"own-start", "trim_horizon").Err())

	before := hook.n.Load()
	rs := s.AcquireMany(ctx, []string{"free", "held", "committed", "own-start"}, "a")
	assert.Equal(t, int64(1), hook.n.Load()-before, "four takes are one round trip")
	require.Len(t, rs, 4)
	require.NoError(t, rs[0].Err)
	assert.Equal(t, "a", rs[0].Take.Owner)
	assert.Equal(t, int64(1), rs[0].Take.Token)
	assert.True(t, rs[0].Take.Checkpoint.IsZero())
	assert.Nil(t, rs[0].Take.ShardStart)
	assert.ErrorIs(t, rs[1].Err, consumer.ErrLeaseHeld)
	assert.Contains(t, rs[1].Err.Error(), "shard held: held by b")
	assert.Equal(t, "b", rs[1].Take.Owner, "a refused take names the holder")
	require.NoError(t, rs[2].Err)
	assert.Equal(t, "4200", rs[2].Take.Checkpoint.Sequence)
	assert.Equal(t, int64(2), rs[2].Take.Token, "a released lease is taken with a new token")
	assert.True(t, rs[2].Take.Quiet >= 0, "the previous holder's release is known")
	require.NoError(t, rs[3].Err)
	require.NotNil(t, rs[3].Take.ShardStart, "the shard's own start comes with the take")
	assert.Equal(t, consumer.StartTrimHorizon, rs[3].Take.ShardStart.Mode)
	for _, r := range []consumer.TakeResult{rs[0], rs[2], rs[3]} {
		assert.False(t, r.Take.Deadline.IsZero())
		assert.False(t, r.Take.GroupStart.IsZero())
	}

	// A value nobody can read gives that shard's lease back; the batch's
	// other take stands.
	require.NoError(t, c.HSet(ctx, s.Keys().Checkpoints, "bad", "not-a-sequence").Err())
	rs = s.AcquireMany(ctx, []string{"bad", "free-2"}, "a")
	require.Error(t, rs[0].Err)
	assert.Contains(t, rs[0].Err.Error(), "not-a-sequence")
	require.NoError(t, rs[1].Err)
	leases, err := s.Leases(ctx)
	require.NoError(t, err)
	assert.True(t, leases["bad"].Expired, "the unreadable shard's lease is given back: %+v", leases["bad"])
	assert.False(t, leases["free-2"].Expired)
	assert.Equal(t, "a", leases["free-2"].Owner)
}

// A member short of its share asks for every shard of its shortfall in one
// round trip (RequestHandoffs), each request as RequestHandoff makes it: the
// holder reads them all as the requester's. Guards the batched request of
// issue 61's 10,000-shard start.
func TestIntegrationRequestHandoffsAsksForEveryShardInOneCall(t *testing.T) {
	t.Parallel()
	red := testenv.NewRedis(t)
	cp, hook := countedCheckpointer(t, red.URL(), t.Name())
	s := cp.Stream("arn:aws:kinesis:us-east-1:000000000000:stream/s")
	ctx := t.Context()
	_, err := s.Join(ctx)
	require.NoError(t, err)
	shards := []string{"s-1", "s-2", "s-3"}
	for _, sh := range append(shards, "s-4") {
		_, err := s.Acquire(ctx, sh, "holder")
		require.NoError(t, err)
	}
	require.NoError(t, s.Heartbeat(ctx, "asker"))
	// The script's first call loads it (NOSCRIPT, then EVAL).
	require.NoError(t, s.RequestHandoff(ctx, "s-4", "asker"))
	before := hook.n.Load()
	require.NoError(t, s.RequestHandoffs(ctx, shards, "asker"))
	assert.Equal(t, int64(1), hook.n.Load()-before, "three requests are one round trip")
	got, err := s.HandoffRequests(ctx, "holder")
	require.NoError(t, err)
	assert.Equal(t, map[string]string{"s-1": "asker", "s-2": "asker", "s-3": "asker", "s-4": "asker"}, got)
}
