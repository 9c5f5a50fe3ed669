package ops

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/connect-kinesis/connect-kinesis/internal/consumer"
	"github.com/connect-kinesis/connect-kinesis/internal/testenv"
)

// TestIntegrationImportSkipsKCLItemsThatAreNotLeases imports a KCL lease
// table (on the DynamoDB emulator) that also holds items that are not
// shard leases: coordinator state and worker metrics marked by entityType
// (one naming an owner, as a leader lock does), an item whose leaseKey is
// no shard id, and a shard-id item without a checkpoint. The import skips
// each, names them in a warning, and imports the leases alone.
func TestIntegrationImportSkipsKCLItemsThatAreNotLeases(t *testing.T) {
	useEmulatorCredentials(t)
	k := testenv.NewKinesisMock(t)
	r := testenv.NewRedis(t)
	d := testenv.NewDynalite(t)
	rs := buildReshardedStream(t, k, "orders")
	ck1 := rs.find(t, shard1, shard1+"-before-9")
	ck2agg := rs.find(t, shard2, shard2+"-agg-1")

	const table = "kcl3-app"
	createTable(t, d, table, "leaseKey", "")
	leader := item{"leaseKey": strAttr("Leader"), "entityType": strAttr("LEADER"), "leaseOwner": strAttr("worker-1"), "leaseCounter": numAttr(7)}
	migration := item{"leaseKey": strAttr("Migration3.0"), "entityType": strAttr("CLIENT_VERSION_MIGRATION"), "cv": strAttr("CLIENT_VERSION_3X")}
	metrics := item{"leaseKey": strAttr("worker-1"), "entityType": strAttr("WORKER_METRIC_STATS"), "checkpoint": strAttr("12"), "lut": numAttr(1700000000)}
	unmarked := item{"leaseKey": strAttr("worker-2"), "leaseOwner": strAttr("worker-2"), "checkpoint": strAttr("TRIM_HORIZON")}
	noCheckpoint := item{"leaseKey": strAttr(shard3), "leaseOwner": strAttr("worker-3"), "leaseCounter": numAttr(1)}
	putItems(t, d, table,
		kclLeaseItem(shard0, "SHARD_END", 0),
		kclLeaseItem(shard1, ck1.seq, 0),
		kclLeaseItem(shard2, ck2agg.seq, ck2agg.sub, shard0),
		leader, migration, metrics, unmarked, noCheckpoint,
	)
	out, err := runCLI(t.Context(), "import", "--redis-url", r.URL(), "--group", "kcl3", "--stream", "orders",
		"--region", testenv.Region, "--endpoint", k.Endpoint, "--from", SourceKCL, "--table", table, "--dynamodb-endpoint", d.Endpoint)
	require.NoError(t, err, out)
	assert.Contains(t, out, "skipped 5 items of table kcl3-app that are not shard leases")
	for _, want := range []string{`leaseKey "Leader" (entityType LEADER)`, `leaseKey "Migration3.0" (entityType CLIENT_VERSION_MIGRATION)`,
		`leaseKey "worker-1" (entityType WORKER_METRIC_STATS)`, `leaseKey "worker-2" (not a shard id)`, `leaseKey "` + shard3 + `" (no checkpoint)`} {
		assert.Contains(t, out, want)
	}
	got := groupCheckpoints(t, r.URL(), "kcl3", rs.arn)
	assert.Equal(t, consumer.Position{ShardEnd: true}, got[shard0])
	assert.Equal(t, ck1.seq, got[shard1].Sequence)
	assert.Equal(t, ck2agg.position(), got[shard2])
	assert.NotContains(t, got, shard3, "the item without a checkpoint gave no position")
	assert.Len(t, got, 3)

	t.Run("a table of nothing but such items", func(t *testing.T) {
		const only = "kcl3-coordinator"
		createTable(t, d, only, "leaseKey", "")
		putItems(t, d, only, leader, migration)
		out, err := runCLI(t.Context(), "import", "--redis-url", r.URL(), "--group", "kcl3-none", "--stream", "orders",
			"--region", testenv.Region, "--endpoint", k.Endpoint, "--from", SourceKCL, "--table", only, "--dynamodb-endpoint", d.Endpoint)
		require.Error(t, err, out)
		assert.Contains(t, err.Error(), "holds no KCL shard lease")
		assert.Contains(t, err.Error(), `leaseKey "Leader"`)
	})
}
