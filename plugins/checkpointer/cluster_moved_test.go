package checkpointer

import (
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/connect-kinesis/connect-kinesis/internal/consumer"
	"github.com/connect-kinesis/connect-kinesis/internal/testenv"
)

// TestIntegrationReplicatedWriteFollowsAMovedSlot guards the reading that
// replicated() writes through a node connection that does not follow
// MOVED: after the group's slot moves to another master (a resharding), a
// commit that waits for replicas must land on the new master, not fail
// until the client's slot map reloads by itself.
func TestIntegrationReplicatedWriteFollowsAMovedSlot(t *testing.T) {
	t.Parallel()
	cluster := testenv.NewRedisClusterWithReplicas(t)
	s, l := clusterStoreWithCommit(t, cluster, "moved-slot", func(cfg *Config) {
		cfg.MinReplicasToAck = 1
		cfg.ReplicaAckTimeout = 5 * time.Second
	})
	ctx := t.Context()

	// Move the slot of the group's keys to another master, keys and all.
	cc := cluster.Client()
	defer cc.Close()
	slot, err := cc.ClusterKeySlot(ctx, s.Keys().Leases).Result()
	require.NoError(t, err)
	from, err := cc.MasterForKey(ctx, s.Keys().Leases)
	require.NoError(t, err)
	var to *testenv.Redis
	var masters []*testenv.Redis
	for _, n := range cluster.Nodes {
		nc := n.Client()
		info, err := nc.Info(ctx, "replication").Result()
		nc.Close()
		require.NoError(t, err)
		if strings.Contains(info, "role:master") {
			masters = append(masters, n)
			if to == nil && n.Addr != from.Options().Addr {
				to = n
			}
		}
	}
	require.NotNil(t, to)
	toC := to.Client()
	defer toC.Close()
	fromID, err := from.ClusterMyID(ctx).Result()
	require.NoError(t, err)
	toID, err := toC.ClusterMyID(ctx).Result()
	require.NoError(t, err)
	sl := strconv.FormatInt(slot, 10)
	require.NoError(t, toC.Do(ctx, "CLUSTER", "SETSLOT", sl, "IMPORTING", fromID).Err())
	require.NoError(t, from.Do(ctx, "CLUSTER", "SETSLOT", sl, "MIGRATING", toID).Err())
	keys, err := from.ClusterGetKeysInSlot(ctx, int(slot), 100).Result()
	require.NoError(t, err)
	require.NotEmpty(t, keys)
	migrate := []any{"MIGRATE", "127.0.0.1", to.Port, "", 0, 5000, "KEYS"}
	for _, k := range keys {
		migrate = append(migrate, k)
	}
	require.NoError(t, from.Do(ctx, migrate...).Err())
	for _, m := range masters {
		mc := m.Client()
		require.NoError(t, mc.Do(ctx, "CLUSTER", "SETSLOT", sl, "NODE", toID).Err())
		mc.Close()
	}

	err = s.Commit(ctx, l, consumer.Position{Sequence: "42"})
	require.NoError(t, err, "the commit follows the slot to its new master")
	v, err := toC.HGet(ctx, s.Keys().Checkpoints, "shardId-000000000000").Result()
	require.NoError(t, err)
	assert.Equal(t, "42", v)
}
