package checkpointer

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/connect-kinesis/connect-kinesis/internal/consumer"
	"github.com/connect-kinesis/connect-kinesis/internal/testenv"
)

// Guards issue 63's reading "re-seed closes never WAIT": a re-seed writes
// the closed set (the gate) and positions back into a store that forgot
// them; with min_replicas_to_ack it must be acknowledged by a replica as a
// commit or a close is, or a failover right after it forgets the gate again.
func TestIntegrationReseedWaitsForReplicas(t *testing.T) {
	t.Parallel()
	master := testenv.NewRedis(t)
	replica := testenv.NewReplica(t, master)
	cfg := DefaultConfig()
	cfg.RedisURL, cfg.Group, cfg.MinReplicasToAck = master.URL(), "reseed-waits", 1
	cfg.ReplicaAckTimeout = 300 * time.Millisecond
	c, err := New(t.Context(), cfg, nil, nil)
	require.NoError(t, err)
	defer c.Close()
	s := c.Stream("orders")
	ctx := t.Context()
	_, err = s.Join(ctx)
	require.NoError(t, err)
	held := mustAcquire(t, s, "shard-1")
	seed := consumer.Seed{Owner: held.Owner, Leases: []consumer.Lease{held},
		Checkpoints: map[string]consumer.Position{"shard-1": {Sequence: "42"}}, Closed: []string{"shard-0"}}
	_, err = s.Reseed(ctx, seed)
	require.NoError(t, err, "with the replica up")

	require.NoError(t, replica.Pause())
	defer func() { _ = replica.Resume() }()
	_, err = s.Reseed(ctx, seed)
	assert.ErrorIs(t, err, ErrNotReplicated, "a re-seed no replica acknowledged")

	require.NoError(t, replica.Resume())
	require.Eventually(t, func() bool {
		_, err := s.Reseed(ctx, seed)
		return err == nil
	}, 10*time.Second, 100*time.Millisecond, "the re-seed completes once the replica answers")
	rc := replica.Client()
	defer rc.Close()
	closed, err := rc.SIsMember(ctx, s.Keys().Closed, "shard-0").Result()
	require.NoError(t, err)
	assert.True(t, closed, "the replica holds the re-seeded close")
}
