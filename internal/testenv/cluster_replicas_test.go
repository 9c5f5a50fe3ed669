package testenv

import (
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// Guards the scale bench's Redis Cluster: six nodes reachable from the
// seeds, writes through a cluster client, and a replica that takes over its
// master's slots on CLUSTER FAILOVER with the data it replicated.
func TestIntegrationRedisClusterSeedsFailover(t *testing.T) {
	seeds, stop, err := StartRedisClusterSeeds(t.Context())
	require.NoError(t, err)
	defer stop()
	require.Len(t, seeds, 6)

	cc := redis.NewClusterClient(&redis.ClusterOptions{Addrs: seeds[:1]})
	defer cc.Close()
	ctx := t.Context()
	for i := range 100 {
		require.NoError(t, cc.Set(ctx, "k"+itoa(i), i, 0).Err())
	}

	nodes, err := cc.ClusterNodes(ctx).Result()
	require.NoError(t, err)
	lines := strings.Split(strings.TrimSpace(nodes), "\n")
	assert.Len(t, lines, 6, "CLUSTER NODES: %s", nodes)
	masters, replicas := 0, 0
	for _, l := range lines {
		switch {
		case strings.Contains(l, "master"):
			masters++
		case strings.Contains(l, "slave"):
			replicas++
		}
	}
	assert.Equal(t, 3, masters, "CLUSTER NODES: %s", nodes)
	assert.Equal(t, 3, replicas, "CLUSTER NODES: %s", nodes)

	// Promote the replica of the master that holds k0; once the cluster
	// client learns the new map, k0 is read from the promoted node.
	master, err := cc.MasterForKey(ctx, "k0")
	require.NoError(t, err)
	masterAddr := master.Options().Addr
	repl := clusterReplicaAddr(t, lines, masterAddr)
	rc := redis.NewClient(&redis.Options{Addr: repl})
	defer rc.Close()
	// The write above was acknowledged by the master alone, so wait for
	// the replica to hold it before promoting it.
	require.Eventually(t, func() bool {
		if err := rc.Do(ctx, "READONLY").Err(); err != nil {
			return false
		}
		got, err := rc.Get(ctx, "k0").Result()
		return err == nil && got == "0"
	}, 10*time.Second, 50*time.Millisecond, "replica %s never held k0", repl)
	require.NoError(t, rc.Do(ctx, "CLUSTER", "FAILOVER").Err())
	require.Eventually(t, func() bool {
		role, err := rc.Do(ctx, "ROLE").Slice()
		return err == nil && len(role) > 0 && role[0] == "master"
	}, 20*time.Second, 100*time.Millisecond, "replica %s not promoted", repl)

	require.Eventually(t, func() bool {
		cc.ReloadState(ctx)
		m, err := cc.MasterForKey(ctx, "k0")
		return err == nil && m.Options().Addr == repl
	}, 20*time.Second, 100*time.Millisecond, "the cluster client never routed k0 to the promoted %s", repl)
	got, err := cc.Get(ctx, "k0").Result()
	require.NoError(t, err)
	assert.Equal(t, "0", got)
	require.NoError(t, cc.Set(ctx, "k0", "after", 0).Err())
}

// clusterReplicaAddr finds, in CLUSTER NODES lines, the host:port of the
// replica of the master at masterAddr.
func clusterReplicaAddr(t *testing.T, lines []string, masterAddr string) string {
	t.Helper()
	var masterID string
	for _, l := range lines {
		f := strings.Fields(l)
		if len(f) > 1 && strings.HasPrefix(f[1], masterAddr+"@") {
			masterID = f[0]
		}
	}
	require.NotEmpty(t, masterID, "no node %s in %v", masterAddr, lines)
	for _, l := range lines {
		f := strings.Fields(l)
		if len(f) > 3 && f[3] == masterID {
			addr, _, _ := strings.Cut(f[1], "@")
			return addr
		}
	}
	t.Fatalf("master %s has no replica in %v", masterAddr, lines)
	return ""
}
