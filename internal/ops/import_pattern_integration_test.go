package ops

import (
	"strconv"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/kinesis"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/connect-kinesis/connect-kinesis/internal/consumer"
	"github.com/connect-kinesis/connect-kinesis/internal/testenv"
)

// TestIntegrationImportPattern: `import --stream PATTERN` imports each
// matching stream the source holds, as `import --stream NAME` would, skips
// the matching streams it does not hold and leaves the others alone;
// from a KCL multi-stream table it finds each stream's identifier, and it
// refuses a single-stream KCL table, whose leases name no stream.
func TestIntegrationImportPattern(t *testing.T) {
	useEmulatorCredentials(t)
	k := testenv.NewKinesisMock(t)
	r := testenv.NewRedis(t)
	d := testenv.NewDynalite(t)
	ctx := t.Context()
	c := k.Client()
	seqs := map[string]string{}
	arns := map[string]string{}
	epochs := map[string]int64{}
	for _, name := range []string{"t-a", "t-b", "t-c", "other"} {
		arns[name] = k.MustCreateStream(t, name, 1)
		out, err := c.PutRecord(ctx, &kinesis.PutRecordInput{StreamName: aws.String(name), PartitionKey: aws.String("k"), Data: []byte(name)})
		require.NoError(t, err)
		seqs[name] = aws.ToString(out.SequenceNumber)
		sum, err := c.DescribeStreamSummary(ctx, &kinesis.DescribeStreamSummaryInput{StreamName: aws.String(name)})
		require.NoError(t, err)
		epochs[name] = aws.ToTime(sum.StreamDescriptionSummary.StreamCreationTimestamp).Unix()
	}
	args := func(group, table, from string) []string {
		return []string{"import", "--redis-url", r.URL(), "--group", group, "--stream", "t-*", "--region", testenv.Region,
			"--endpoint", k.Endpoint, "--from", from, "--table", table, "--dynamodb-endpoint", d.Endpoint}
	}
	want := func(name string) map[string]consumer.Position {
		return map[string]consumer.Position{shard0: {Sequence: seqs[name]}}
	}

	t.Run("redpanda connect table", func(t *testing.T) {
		const table = "connect-pattern"
		createTable(t, d, table, "StreamID", "ShardID")
		putItems(t, d, table,
			item{"StreamID": strAttr("t-a"), "ShardID": strAttr(shard0), "SequenceNumber": strAttr(seqs["t-a"])},
			item{"StreamID": strAttr(arns["t-b"]), "ShardID": strAttr(shard0), "SequenceNumber": strAttr(seqs["t-b"])},
			item{"StreamID": strAttr("other"), "ShardID": strAttr(shard0), "SequenceNumber": strAttr(seqs["other"])},
		)
		out, err := runCLI(ctx, args("connect-pattern", table, SourceConnect)...)
		require.NoError(t, err, out)
		assert.Contains(t, out, "skipping t-c: table "+table+" holds nothing of it")
		assert.Contains(t, out, "imported 2 streams matching t-*: [t-a t-b]")
		assert.Equal(t, want("t-a"), groupCheckpoints(t, r.URL(), "connect-pattern", arns["t-a"]))
		assert.Equal(t, want("t-b"), groupCheckpoints(t, r.URL(), "connect-pattern", arns["t-b"]), "found by its ARN")
		assert.Empty(t, groupCheckpoints(t, r.URL(), "connect-pattern", arns["t-c"]))
		assert.Empty(t, groupCheckpoints(t, r.URL(), "connect-pattern", arns["other"]), "not matching: left alone")
	})

	t.Run("kcl multi-stream table", func(t *testing.T) {
		const table = "kcl-multi-pattern"
		createTable(t, d, table, "leaseKey", "")
		ident := func(name string) string { return "000000000000:" + name + ":" + strconv.FormatInt(epochs[name], 10) }
		putItems(t, d, table,
			kclLeaseItem(ident("t-a")+":"+shard0, seqs["t-a"], 0),
			kclLeaseItem(ident("t-c")+":"+shard0, seqs["t-c"], 0),
		)
		out, err := runCLI(ctx, args("kcl-pattern", table, SourceKCL)...)
		require.NoError(t, err, out)
		assert.Contains(t, out, "imported 2 streams matching t-*: [t-a t-c]")
		// A KCL checkpoint carries its sub-sequence number (0 here).
		kcl := func(name string) map[string]consumer.Position {
			return map[string]consumer.Position{shard0: {Sequence: seqs[name], HasSub: true}}
		}
		assert.Equal(t, kcl("t-a"), groupCheckpoints(t, r.URL(), "kcl-pattern", arns["t-a"]))
		assert.Equal(t, kcl("t-c"), groupCheckpoints(t, r.URL(), "kcl-pattern", arns["t-c"]))
		assert.Empty(t, groupCheckpoints(t, r.URL(), "kcl-pattern", arns["t-b"]))
	})

	t.Run("kcl single-stream table", func(t *testing.T) {
		const table = "kcl-single-pattern"
		createTable(t, d, table, "leaseKey", "")
		putItems(t, d, table, kclLeaseItem(shard0, seqs["t-a"], 0))
		out, err := runCLI(ctx, args("kcl-single", table, SourceKCL)...)
		require.Error(t, err, out)
		assert.Contains(t, err.Error(), "is a single-stream KCL lease table")
		assert.Empty(t, groupCheckpoints(t, r.URL(), "kcl-single", arns["t-a"]))
	})
}
