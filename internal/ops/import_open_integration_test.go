package ops

import (
	"fmt"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/kinesis"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/connect-kinesis/connect-kinesis/internal/consumer"
	"github.com/connect-kinesis/connect-kinesis/internal/testenv"
)

// TestIntegrationImportRefusesToCloseAnOpenShard guards against a KCL import
// closing a shard that the stream lists open (it would never be read): the
// single-stream table of another application whose shard 0 was split, and a
// multi-stream table holding only a deleted incarnation's identifier, are
// both refused with a message naming the shard and the override.
func TestIntegrationImportRefusesToCloseAnOpenShard(t *testing.T) {
	useEmulatorCredentials(t)
	k := testenv.NewKinesisMock(t)
	r := testenv.NewRedis(t)
	d := testenv.NewDynalite(t)
	arn := k.MustCreateStream(t, "orders", 2)
	for i := range 5 {
		for _, hash := range []string{"0", "170141183460469231731687303715884105728"} {
			_, err := k.Client().PutRecord(t.Context(), &kinesis.PutRecordInput{StreamName: aws.String("orders"),
				PartitionKey: aws.String("k"), ExplicitHashKey: aws.String(hash), Data: []byte(fmt.Sprint(i))})
			require.NoError(t, err)
		}
	}
	importArgs := func(group, table string, extra ...string) []string {
		return append([]string{"import", "--redis-url", r.URL(), "--group", group, "--stream", "orders",
			"--region", testenv.Region, "--endpoint", k.Endpoint, "--from", SourceKCL, "--table", table, "--dynamodb-endpoint", d.Endpoint}, extra...)
	}

	t.Run("single-stream table of another application whose shard 0 was split", func(t *testing.T) {
		const table = "other-app"
		createTable(t, d, table, "leaseKey", "")
		putItems(t, d, table,
			kclLeaseItem(shard0, "SHARD_END", 0),
			kclLeaseItem(shard1, "LATEST", 0),
			kclLeaseItem(shard2, "TRIM_HORIZON", 0, shard0),
			kclLeaseItem(shard3, "TRIM_HORIZON", 0, shard0),
		)
		out, err := runCLI(t.Context(), importArgs("other", table)...)
		require.Error(t, err, out)
		t.Log(err)
		assert.Contains(t, err.Error(), shard0)
		assert.Contains(t, err.Error(), "--"+flagAllowOpenShard+" "+shard0)
		assert.Empty(t, groupCheckpoints(t, r.URL(), "other", arn), "nothing written")
		closed, err := groupStore(t, r.URL(), "other", arn).ClosedShards(t.Context())
		require.NoError(t, err)
		assert.Empty(t, closed, "no shard closed")

		out, err = runCLI(t.Context(), importArgs("other", table, "--dry-run")...)
		require.NoError(t, err, out)
		assert.Contains(t, out, "would be refused without --"+flagAllowOpenShard+" "+shard0)

		// The override names the shard, and then the import goes through.
		out, err = runCLI(t.Context(), importArgs("other", table, "--"+flagAllowOpenShard, shard0)...)
		require.NoError(t, err, out)
		assert.Equal(t, consumer.Position{ShardEnd: true}, groupCheckpoints(t, r.URL(), "other", arn)[shard0])
	})

	t.Run("multi-stream table holding only a deleted incarnation's identifier", func(t *testing.T) {
		const table = "deleted-incarnation"
		const ident = "000000000000:orders:1600000000"
		createTable(t, d, table, "leaseKey", "")
		multi := func(shard, checkpoint string, parents ...string) item {
			it := kclLeaseItem(ident+":"+shard, checkpoint, 0, parents...)
			it["streamName"], it["shardId"] = strAttr(ident), strAttr(shard)
			return it
		}
		putItems(t, d, table, multi(shard0, "SHARD_END"), multi(shard1, "LATEST"),
			multi(shard2, "TRIM_HORIZON", shard0), multi(shard3, "TRIM_HORIZON", shard0))
		out, err := runCLI(t.Context(), importArgs("deleted", table)...)
		require.Error(t, err, out)
		t.Log(err)
		assert.Contains(t, err.Error(), ident)
		assert.Contains(t, err.Error(), "--"+flagSourceStream)
		assert.Contains(t, err.Error(), shard0, "the shard it would close is named")
		assert.Contains(t, err.Error(), "--"+flagAllowOpenShard+" "+shard0)
		assert.Empty(t, groupCheckpoints(t, r.URL(), "deleted", arn), "nothing written")

		// Naming the identifier passes the epoch check, not the shard's.
		out, err = runCLI(t.Context(), importArgs("deleted", table, "--"+flagSourceStream, ident)...)
		require.Error(t, err, out)
		assert.Contains(t, err.Error(), "--"+flagAllowOpenShard+" "+shard0)
		assert.Empty(t, groupCheckpoints(t, r.URL(), "deleted", arn), "nothing written")
	})
}
