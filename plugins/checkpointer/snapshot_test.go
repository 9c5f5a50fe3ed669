package checkpointer

import (
	"context"
	"sync"
	"testing"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/connect-kinesis/connect-kinesis/internal/consumer"
	"github.com/connect-kinesis/connect-kinesis/internal/testenv"
)

// closeAfterFirst closes a shard (its SHARD_END and the closed set, as
// close.lua writes them, through another client) right after the first
// command this client sends, once.
type closeAfterFirst struct {
	once  sync.Once
	close func(ctx context.Context)
}

func (h *closeAfterFirst) DialHook(next redis.DialHook) redis.DialHook { return next }
func (h *closeAfterFirst) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		err := next(ctx, cmd)
		h.once.Do(func() { h.close(ctx) })
		return err
	}
}
func (h *closeAfterFirst) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return next
}

// TestIntegrationSnapshotIsOneRead guards the reading that export is not a
// snapshot: read one by one, the checkpoints and the closed set of a shard
// that closes between them disagree (checkpoint 41, yet closed); Snapshot
// reads them in one script, so they agree.
func TestIntegrationSnapshotIsOneRead(t *testing.T) {
	t.Parallel()
	r := testenv.NewRedis(t)
	b := backend{url: r.URL(), kind: KindSimple}
	const shard = "shardId-000000000000"
	setUp := func(t *testing.T, group string) (*Store, *closeAfterFirst) {
		c := newTestCheckpointer(t, b, group)
		s := c.Stream(arnOf("orders"))
		_, err := s.Reset(t.Context(), &consumer.StartOverride{Mode: consumer.StartTrimHorizon}, map[string]consumer.Position{shard: {Sequence: "41"}},
			map[string]consumer.StartOverride{"shardId-000000000001": {Mode: consumer.StartTrimHorizon}}, false)
		require.NoError(t, err)
		// Loaded once, so that EVALSHA is not answered NOSCRIPT (EVAL,
		// a second command, follows).
		_, err = s.Snapshot(t.Context())
		require.NoError(t, err)
		other := r.Client()
		t.Cleanup(func() { _ = other.Close() })
		h := &closeAfterFirst{close: func(ctx context.Context) {
			require.NoError(t, other.HSet(ctx, s.Keys().Checkpoints, shard, "SHARD_END").Err())
			require.NoError(t, other.SAdd(ctx, s.Keys().Closed, shard).Err())
		}}
		c.client.AddHook(h)
		return s, h
	}

	t.Run("separate reads disagree", func(t *testing.T) {
		s, _ := setUp(t, "separate")
		ckpts, err := s.Checkpoints(t.Context())
		require.NoError(t, err)
		closed, err := s.ClosedShards(t.Context())
		require.NoError(t, err)
		assert.Equal(t, consumer.Position{Sequence: "41"}, ckpts[shard])
		assert.True(t, closed[shard], "closed, with checkpoint 41")
	})
	t.Run("the snapshot agrees", func(t *testing.T) {
		s, _ := setUp(t, "snapshot")
		snap, err := s.Snapshot(t.Context())
		require.NoError(t, err)
		assert.Equal(t, consumer.Position{Sequence: "41"}, snap.Checkpoints[shard])
		assert.False(t, snap.Closed[shard], "open, as its checkpoint says")
		require.NotNil(t, snap.Start)
		assert.Equal(t, consumer.StartTrimHorizon, snap.Start.Mode)
		assert.Equal(t, map[string]consumer.StartOverride{"shardId-000000000001": {Mode: consumer.StartTrimHorizon}}, snap.ShardStarts)
		snap, err = s.Snapshot(t.Context())
		require.NoError(t, err)
		assert.Equal(t, consumer.Position{ShardEnd: true}, snap.Checkpoints[shard])
		assert.True(t, snap.Closed[shard], "after the close, both say so")
	})
}
