package checkpointer

import (
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/connect-kinesis/connect-kinesis/internal/consumer"
	"github.com/connect-kinesis/connect-kinesis/internal/testenv"
)

// TestIntegrationClusterStoreFollowsAPromotionOfItsMastersReplica guards
// the defect the failover-cluster soak classes found: with kind cluster,
// after the master holding a group's slot died and its replica took the
// slot over, the store kept dialling the dead master, its calls failing,
// until go-redis reloaded its slot map on its own (every 60 s by
// default) or a node answered MOVED: in the soak the instances reached the
// promoted replica 18 s and 33 s after promotions, their leases long
// lapsed. A failed call must make the next ones find the new master.
func TestIntegrationClusterStoreFollowsAPromotionOfItsMastersReplica(t *testing.T) {
	t.Parallel()
	cluster := testenv.NewRedisClusterWithReplicas(t)
	s, _ := clusterStoreWithCommit(t, cluster, "promotion", func(cfg *Config) { cfg.MinReplicasToAck = 0 })
	ctx := t.Context()
	promoted := killMasterAndTakeOver(t, cluster, s.Keys().Leases)

	// The dead master stays dead, so no node answers MOVED for its slots.
	var lastErr error
	for time.Since(promoted) < 10*time.Second {
		if _, lastErr = s.Checkpoints(ctx); lastErr == nil {
			break
		}
		time.Sleep(200 * time.Millisecond)
	}
	require.NoError(t, lastErr, "the store still failed %v after the replica took the slots over", time.Since(promoted).Round(100*time.Millisecond))
	t.Logf("the store reached the promoted replica %v after the takeover", time.Since(promoted).Round(100*time.Millisecond))
}

// TestIntegrationClusterWaitedCommitFollowsAPromotion guards the waited
// write's side of the Cluster store's reload after an unanswered call: a
// commit that waits for a replica (min_replicas_to_ack automatic, the
// default: 1 while the master had one) writes on a connection of the
// master's node client, not through the cluster client, so its failures
// on the dead master asked for no reload, and a store whose only calls
// were such writes (commits, closes, delivery marks) went on dialling the
// dead master until go-redis's own reload a minute later.
func TestIntegrationClusterWaitedCommitFollowsAPromotion(t *testing.T) {
	t.Parallel()
	cluster := testenv.NewRedisClusterWithReplicas(t)
	s, l := clusterStoreWithCommit(t, cluster, "promotion-waited", func(cfg *Config) {
		cfg.MinReplicasToAck = AutoReplicas
		cfg.ReplicaAckTimeout = 2 * time.Second
	})
	ctx := t.Context()
	promoted := killMasterAndTakeOver(t, cluster, s.Keys().Leases)

	// The promoted replica has no replica of its own: the first commit
	// there is refused for want of one (ErrNotReplicated), and the next
	// asks the master again and waits for none.
	var lastErr error
	for time.Since(promoted) < 20*time.Second {
		if lastErr = s.Commit(ctx, l, consumer.Position{Sequence: "42"}); lastErr == nil {
			break
		}
		time.Sleep(200 * time.Millisecond)
	}
	require.NoError(t, lastErr, "the commit still failed %v after the replica took the slots over", time.Since(promoted).Round(100*time.Millisecond))
	t.Logf("the commit reached the promoted replica %v after the takeover", time.Since(promoted).Round(100*time.Millisecond))
}

// killMasterAndTakeOver SIGKILLs the master serving key's slot and has its
// replica take the slots over (CLUSTER FAILOVER TAKEOVER); it returns when
// the replica calls itself the master.
func killMasterAndTakeOver(t *testing.T, cluster *testenv.RedisCluster, key string) time.Time {
	t.Helper()
	ctx := t.Context()
	cc := cluster.Client()
	defer cc.Close()
	master, err := cc.MasterForKey(ctx, key)
	require.NoError(t, err)
	replica, err := cluster.ReplicaOf(ctx, master.Options().Addr)
	require.NoError(t, err)
	for _, n := range cluster.Nodes {
		if n.Addr == master.Options().Addr {
			n.Kill()
		}
	}
	rc := replica.Client()
	defer rc.Close()
	require.Eventually(t, func() bool {
		_ = rc.Do(ctx, "CLUSTER", "FAILOVER", "TAKEOVER").Err()
		nodes, err := rc.ClusterNodes(ctx).Result()
		return err == nil && strings.Contains(nodes, "myself,master")
	}, 30*time.Second, 500*time.Millisecond, "the replica takes the slots over")
	return time.Now()
}

// clusterStoreWithCommit opens the store of stream "orders" of group on a
// Cluster (kind cluster, a 30 s lease, then tune), and commits 41 on
// shard 0 under a lease it returns. The store closes when the test ends.
func clusterStoreWithCommit(t *testing.T, cluster *testenv.RedisCluster, group string, tune func(*Config)) (*Store, consumer.Lease) {
	t.Helper()
	cfg := testConfig(backend{url: cluster.URL(), kind: KindCluster}, group)
	cfg.LeasePeriod = 30 * time.Second
	tune(&cfg)
	c, err := New(t.Context(), cfg, nil, nil)
	require.NoError(t, err)
	t.Cleanup(func() { _ = c.Close() })
	s := c.Stream("orders")
	l, err := leaseOf(s.Acquire(t.Context(), "shardId-000000000000", "a"))
	require.NoError(t, err)
	require.NoError(t, s.Commit(t.Context(), l, consumer.Position{Sequence: "41"}))
	return s, l
}
