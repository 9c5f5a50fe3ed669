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

// TestIntegrationImportPatternSkipsADeletedIncarnationsLeases guards a
// pattern import over a KCL multi-stream table that still holds the leases
// of a deleted stream of the same name as a matching stream (the KCL keeps
// a former stream's leases by default): the table holds nothing of the
// stream now listed, so it is skipped and the other streams are imported.
// It must not stop the whole import with a refusal whose remedy,
// --source-stream, a pattern import does not accept.
func TestIntegrationImportPatternSkipsADeletedIncarnationsLeases(t *testing.T) {
	useEmulatorCredentials(t)
	k := testenv.NewKinesisMock(t)
	r := testenv.NewRedis(t)
	d := testenv.NewDynalite(t)
	ctx := t.Context()
	c := k.Client()
	arns, seqs, epochs := map[string]string{}, map[string]string{}, map[string]int64{}
	for _, name := range []string{"p-a", "p-b"} {
		arns[name] = k.MustCreateStream(t, name, 1)
		out, err := c.PutRecord(ctx, &kinesis.PutRecordInput{StreamName: aws.String(name), PartitionKey: aws.String("k"), Data: []byte(name)})
		require.NoError(t, err)
		seqs[name] = aws.ToString(out.SequenceNumber)
		sum, err := c.DescribeStreamSummary(ctx, &kinesis.DescribeStreamSummaryInput{StreamName: aws.String(name)})
		require.NoError(t, err)
		epochs[name] = aws.ToTime(sum.StreamDescriptionSummary.StreamCreationTimestamp).Unix()
	}
	const table = "kcl-multi-former"
	createTable(t, d, table, "leaseKey", "")
	const former = "000000000000:p-a:1600000000"
	current := "000000000000:p-b:" + strconv.FormatInt(epochs["p-b"], 10)
	putItems(t, d, table,
		kclLeaseItem(former+":"+shard0, "SHARD_END", 0),
		kclLeaseItem(current+":"+shard0, seqs["p-b"], 0),
	)
	out, err := runCLI(ctx, "import", "--redis-url", r.URL(), "--group", "former", "--stream", "p-*", "--region", testenv.Region,
		"--endpoint", k.Endpoint, "--from", SourceKCL, "--table", table, "--dynamodb-endpoint", d.Endpoint)
	require.NoError(t, err, out)
	assert.Contains(t, out, "skipping p-a: table "+table+" holds nothing of it, only leases of a deleted stream of that name ("+former+
		"; import one with --stream p-a --source-stream <identifier> if it is this stream's)")
	assert.Contains(t, out, "imported 1 streams matching p-*: [p-b]")
	assert.Empty(t, groupCheckpoints(t, r.URL(), "former", arns["p-a"]), "the deleted stream's SHARD_END is not imported")
	assert.Equal(t, map[string]consumer.Position{shard0: {Sequence: seqs["p-b"], HasSub: true}}, groupCheckpoints(t, r.URL(), "former", arns["p-b"]))
}
