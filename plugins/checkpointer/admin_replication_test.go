package checkpointer

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/connect-kinesis/connect-kinesis/internal/consumer"
	"github.com/connect-kinesis/connect-kinesis/internal/testenv"
)

// TestIntegrationOperatorWritesWaitForReplicas guards the reading that
// operator writes never WAIT: a reset (with the token bump that fences the
// readers), an import's replace, a delete and a restore of redelivery marks
// must not be reported done while the replica that a failover would promote
// does not hold them, or the failover brings back the old checkpoints and
// the readers' old tokens.
func TestIntegrationOperatorWritesWaitForReplicas(t *testing.T) {
	t.Parallel()
	master := testenv.NewRedis(t)
	replica := testenv.NewReplica(t, master)
	cfg := DefaultConfig()
	cfg.RedisURL, cfg.Group, cfg.MinReplicasToAck = master.URL(), "operator-writes", 1
	cfg.ReplicaAckTimeout = 300 * time.Millisecond
	c, err := New(t.Context(), cfg, nil, nil)
	require.NoError(t, err)
	defer c.Close()
	s := c.Stream("orders")
	ctx := t.Context()
	const shard = "shardId-000000000000"
	_, err = s.Reset(ctx, nil, map[string]consumer.Position{shard: {Sequence: "10"}}, nil, false)
	require.NoError(t, err, "with the replica up")

	require.NoError(t, replica.Pause())
	defer func() { _ = replica.Resume() }()
	_, err = s.Reset(ctx, nil, map[string]consumer.Position{shard: {Sequence: "20"}}, nil, true)
	assert.ErrorIs(t, err, ErrNotReplicated, "reset")
	_, err = s.ReplaceCheckpoints(ctx, map[string]consumer.Position{shard: {Sequence: "20"}}, map[string]consumer.Position{shard: {Sequence: "30"}}, nil, true)
	assert.ErrorIs(t, err, ErrNotReplicated, "import")
	_, err = s.RestoreDelivered(ctx, map[string]consumer.Position{shard: {Sequence: "40"}})
	assert.ErrorIs(t, err, ErrNotReplicated, "restoring marks")
	_, err = s.RestoreDelivered(ctx, map[string]consumer.Position{shard: {Sequence: "40"}})
	assert.ErrorIs(t, err, ErrNotReplicated, "restoring marks again, nothing moving")
	_, err = s.Delete(ctx, true)
	assert.ErrorIs(t, err, ErrNotReplicated, "delete")

	require.NoError(t, replica.Resume())
	require.Eventually(t, func() bool {
		_, err := s.Reset(ctx, nil, map[string]consumer.Position{shard: {Sequence: "50"}}, nil, true)
		return err == nil
	}, 10*time.Second, 100*time.Millisecond, "the reset completes once the replica answers")
	rc := replica.Client()
	defer rc.Close()
	v, err := rc.HGet(ctx, s.Keys().Checkpoints, shard).Result()
	require.NoError(t, err)
	assert.Equal(t, "50", v, "the replica holds the reset")
}
