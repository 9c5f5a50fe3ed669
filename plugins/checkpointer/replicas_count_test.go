package checkpointer

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/connect-kinesis/connect-kinesis/internal/consumer"
	"github.com/connect-kinesis/connect-kinesis/internal/testenv"
)

// TestIntegrationWaitOneWithTwoReplicasCountsOne settles the reading on
// WAIT 1 with two or more replicas: the automatic choice counts a close
// done once one replica holds it, so a replica that missed it exists and
// only the failover's choice of the most advanced replica keeps the gate
// (the rule docs/checkpointer.md states); min_replicas_to_ack 2 waits for
// both.
func TestIntegrationWaitOneWithTwoReplicasCountsOne(t *testing.T) {
	t.Parallel()
	master := testenv.NewRedis(t)
	behind := testenv.NewReplica(t, master)
	testenv.NewReplica(t, master)
	ctx := t.Context()
	closeWith := func(group string, n int) error {
		cfg := DefaultConfig()
		cfg.RedisURL, cfg.Group, cfg.MinReplicasToAck = master.URL(), group, n
		cfg.ReplicaAckTimeout = 300 * time.Millisecond
		c, err := New(ctx, cfg, nil, nil)
		require.NoError(t, err)
		defer c.Close()
		s := c.Stream("orders")
		l, err := leaseOf(s.Acquire(ctx, "shardId-000000000000", "a"))
		require.NoError(t, err)
		require.NoError(t, s.Commit(ctx, l, consumer.Position{Sequence: "41"}))
		require.NoError(t, behind.Pause())
		defer func() { require.NoError(t, behind.Resume()) }()
		return s.CloseShard(ctx, l)
	}
	assert.NoError(t, closeWith("one", 1), "one of two replicas acknowledged: done, while the other misses it")
	assert.ErrorIs(t, closeWith("two", 2), ErrNotReplicated, "min_replicas_to_ack 2 waits for both")
}
