package ops

import (
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/kinesis"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/connect-kinesis/connect-kinesis/internal/consumer"
	"github.com/connect-kinesis/connect-kinesis/internal/testenv"
)

// TestIntegrationImportFlagsNameWhatTheyOverride guards the two refusals of
// `checkpoints import` that one --force used to override together: a source
// whose leases are live (--ignore-live-source) and readers of the target
// group holding live leases (--fence-readers). Each refusal names its own
// flag, each flag overrides only its own refusal, and --force still means
// both, with a deprecation warning.
func TestIntegrationImportFlagsNameWhatTheyOverride(t *testing.T) {
	useEmulatorCredentials(t)
	k := testenv.NewKinesisMock(t)
	r := testenv.NewRedis(t)
	d := testenv.NewDynalite(t)
	const stream = "flags"
	arn := k.MustCreateStream(t, stream, 2)
	put, err := k.Client().PutRecord(t.Context(), &kinesis.PutRecordInput{StreamName: aws.String(stream),
		PartitionKey: aws.String("k"), ExplicitHashKey: aws.String("0"), Data: []byte("x")})
	require.NoError(t, err)
	shard, seq := *put.ShardId, *put.SequenceNumber
	const otherShard = "shardId-000000000001"

	const liveTable, stoppedTable = "connect-live", "connect-stopped"
	createTable(t, d, liveTable, "StreamID", "ShardID")
	putItems(t, d, liveTable, item{
		"StreamID": strAttr(arn), "ShardID": strAttr(shard), "SequenceNumber": strAttr(seq),
		"ClientID": strAttr("old-consumer-1"), "LeaseTimeout": strAttr(time.Now().Add(time.Hour).Format(time.RFC3339Nano)),
	})
	createTable(t, d, stoppedTable, "StreamID", "ShardID")
	putItems(t, d, stoppedTable, item{"StreamID": strAttr(arn), "ShardID": strAttr(shard), "SequenceNumber": strAttr(seq)})

	importArgs := func(group, table string, extra ...string) []string {
		return append([]string{"import", "--redis-url", r.URL(), "--group", group, "--stream", stream,
			"--region", testenv.Region, "--endpoint", k.Endpoint, "--from", SourceConnect, "--table", table, "--dynamodb-endpoint", d.Endpoint}, extra...)
	}
	imported := func(t *testing.T, group string) bool {
		t.Helper()
		p, ok := groupCheckpoints(t, r.URL(), group, arn)[shard]
		return ok && p == consumer.Position{Sequence: seq}
	}
	holdLease := func(t *testing.T, group string) {
		t.Helper()
		_, err := groupStore(t, r.URL(), group, arn).Acquire(t.Context(), otherShard, "running-reader")
		require.NoError(t, err)
	}

	t.Run("a live source is refused naming --ignore-live-source, which is enough", func(t *testing.T) {
		out, err := runCLI(t.Context(), importArgs("src", liveTable)...)
		require.Error(t, err, out)
		assert.Contains(t, err.Error(), "old-consumer-1")
		assert.Contains(t, err.Error(), "--"+flagIgnoreLiveSource)
		assert.NotContains(t, err.Error(), "--"+flagFenceReaders)
		assert.NotContains(t, err.Error(), "--force")
		assert.False(t, imported(t, "src"), "nothing written")

		out, err = runCLI(t.Context(), importArgs("src", liveTable, "--"+flagFenceReaders)...)
		require.Error(t, err, out, "--fence-readers does not accept a live source")
		assert.Contains(t, err.Error(), "--"+flagIgnoreLiveSource)

		out, err = runCLI(t.Context(), importArgs("src", liveTable, "--"+flagIgnoreLiveSource)...)
		require.NoError(t, err, out)
		assert.True(t, imported(t, "src"))
	})

	t.Run("running readers are refused naming --fence-readers, which is enough", func(t *testing.T) {
		holdLease(t, "readers")
		out, err := runCLI(t.Context(), importArgs("readers", stoppedTable)...)
		require.Error(t, err, out)
		assert.Contains(t, err.Error(), otherShard)
		assert.Contains(t, err.Error(), "--"+flagFenceReaders)
		assert.NotContains(t, err.Error(), "--"+flagIgnoreLiveSource)
		assert.NotContains(t, err.Error(), "or force")
		assert.False(t, imported(t, "readers"), "nothing written")

		out, err = runCLI(t.Context(), importArgs("readers", stoppedTable, "--"+flagIgnoreLiveSource)...)
		require.Error(t, err, out, "--ignore-live-source does not fence the group's readers")
		assert.Contains(t, err.Error(), "--"+flagFenceReaders)

		out, err = runCLI(t.Context(), importArgs("readers", stoppedTable, "--"+flagFenceReaders)...)
		require.NoError(t, err, out)
		assert.Contains(t, out, "leases fenced out")
		assert.True(t, imported(t, "readers"))
	})

	t.Run("a dry run names the flag of each refusal", func(t *testing.T) {
		holdLease(t, "dry")
		out, err := runCLI(t.Context(), importArgs("dry", liveTable, "--dry-run")...)
		require.NoError(t, err, out)
		assert.Contains(t, out, "would be refused without --"+flagFenceReaders+": the group holds live leases on "+otherShard)
		assert.Contains(t, out, "would be refused without --"+flagIgnoreLiveSource+": the source holds live leases: "+shard)
	})

	t.Run("--force still means both, with a deprecation warning", func(t *testing.T) {
		holdLease(t, "forced")
		out, err := runCLI(t.Context(), importArgs("forced", liveTable, "--force")...)
		require.NoError(t, err, out)
		assert.Contains(t, out, "--force is deprecated")
		assert.Contains(t, out, "--"+flagIgnoreLiveSource+" --"+flagFenceReaders)
		assert.True(t, imported(t, "forced"))
	})
}
