package checkpointer

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/connect-kinesis/connect-kinesis/internal/consumer"
	"github.com/connect-kinesis/connect-kinesis/internal/testenv"
)

// TestIntegrationClusterWithReplicasKeepsTheGate runs the WAIT path on a
// Redis Cluster of three masters with one replica each: with the automatic
// replica count, a close during a stall of the replica of the master that
// holds the group's slot is not reported done; once the replica answers it
// is; and after that master is killed and its replica promoted, the closed
// set and the checkpoints are on the new master.
func TestIntegrationClusterWithReplicasKeepsTheGate(t *testing.T) {
	t.Parallel()
	cluster := testenv.NewRedisClusterWithReplicas(t)
	cfg := testConfig(backend{url: cluster.URL(), kind: KindCluster}, "cluster-replicas")
	cfg.LeasePeriod = 30 * time.Second
	cfg.ReplicaAckTimeout = 5 * time.Second // a replica of a loaded machine may lag; the test is about the gate
	c, err := New(t.Context(), cfg, nil, nil)
	require.NoError(t, err)
	defer c.Close()
	s := c.Stream("orders")
	ctx := t.Context()

	parent, err := leaseOf(s.Acquire(ctx, "shardId-000000000000", "a"))
	require.NoError(t, err)
	require.NoError(t, s.Commit(ctx, parent, consumer.Position{Sequence: "41"}))
	other, err := leaseOf(s.Acquire(ctx, "shardId-000000000001", "a"))
	require.NoError(t, err)
	require.NoError(t, s.Commit(ctx, other, consumer.Position{Sequence: "42"}))

	cc := cluster.Client()
	defer cc.Close()
	master, err := cc.MasterForKey(ctx, s.Keys().Leases)
	require.NoError(t, err)
	masterAddr := master.Options().Addr
	replica, err := cluster.ReplicaOf(ctx, masterAddr)
	require.NoError(t, err)

	require.NoError(t, replica.Pause())
	err = s.CloseShard(ctx, parent)
	require.NoError(t, replica.Resume())
	require.ErrorIs(t, err, ErrNotReplicated, "a close the replica did not acknowledge is not reported done")
	require.NoError(t, s.CloseShard(ctx, parent))

	for _, n := range cluster.Nodes {
		if n.Addr == masterAddr {
			n.Kill()
		}
	}
	// The replica takes over the slot (cluster-node-timeout 2 s); a client
	// made after that finds the gate and the checkpoints there.
	rc := replica.Client()
	defer rc.Close()
	require.Eventually(t, func() bool {
		role, err := rc.Do(ctx, "ROLE").Slice()
		return err == nil && len(role) > 0 && role[0] == "master"
	}, 60*time.Second, 200*time.Millisecond, "the replica of the killed master is promoted")
	c2, err := New(ctx, cfg, nil, nil)
	require.NoError(t, err)
	defer c2.Close()
	s2 := c2.Stream("orders")
	var closed map[string]bool
	var lastErr error
	// The cluster's other nodes learn of the promotion by gossip; beside a
	// loaded make test run that took longer than 30 s once (a new client
	// still dialled the killed master), so the wait is a minute. What is
	// asserted is that the gate survives, not how fast gossip converges.
	for deadline := time.Now().Add(60 * time.Second); time.Now().Before(deadline); time.Sleep(200 * time.Millisecond) {
		if closed, lastErr = s2.ClosedShards(ctx); lastErr == nil {
			break
		}
	}
	require.NoError(t, lastErr, "the promoted replica answers")
	assert.Equal(t, map[string]bool{"shardId-000000000000": true}, closed)
	cps, err := s2.Checkpoints(ctx)
	require.NoError(t, err)
	assert.Equal(t, map[string]consumer.Position{
		"shardId-000000000000": {ShardEnd: true},
		"shardId-000000000001": {Sequence: "42"},
	}, cps)
}
