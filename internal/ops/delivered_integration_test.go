package ops

import (
	"encoding/json"
	"os"
	"path/filepath"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/kinesis"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/connect-kinesis/connect-kinesis/internal/consumer"
	"github.com/connect-kinesis/connect-kinesis/internal/testenv"
)

// The redelivery marks (how far the group may have delivered each shard)
// are in an export and in `show --json`, and a reset from the export
// writes them back after a delete: records read again stay marked.
func TestIntegrationExportKeepsTheRedeliveryMarks(t *testing.T) {
	useEmulatorCredentials(t)
	k := testenv.NewKinesisMock(t)
	r := testenv.NewRedis(t)
	ctx := t.Context()
	arn := k.MustCreateStream(t, "marks", 1)
	var seqs []string
	for range 2 {
		out, err := k.Client().PutRecord(ctx, &kinesis.PutRecordInput{StreamName: aws.String("marks"),
			PartitionKey: aws.String("k"), Data: []byte("x")})
		require.NoError(t, err)
		seqs = append(seqs, *out.SequenceNumber)
	}
	args := func(sub string, extra ...string) []string {
		return append([]string{sub, "--redis-url", r.URL(), "--group", "g", "--stream", "marks",
			"--region", testenv.Region, "--endpoint", k.Endpoint}, extra...)
	}
	s := groupStore(t, r.URL(), "g", arn)
	_, err := s.Reset(ctx, nil, map[string]consumer.Position{shard0: {Sequence: seqs[0]}}, nil, false)
	require.NoError(t, err)
	c := r.Client()
	defer c.Close()
	require.NoError(t, c.HSet(ctx, s.Keys().Delivered, shard0, seqs[1]).Err())

	out, err := runCLI(ctx, args("show", "--json")...)
	require.NoError(t, err, out)
	var rep ShowReport
	require.NoError(t, json.Unmarshal([]byte(out), &rep), out)
	require.Len(t, rep.Shards, 1)
	assert.Equal(t, seqs[1], rep.Shards[0].Delivered)

	file := filepath.Join(t.TempDir(), "export.json")
	out, err = runCLI(ctx, args("export", "-o", file)...)
	require.NoError(t, err, out)
	raw, err := os.ReadFile(file)
	require.NoError(t, err)
	var doc ExportDocument
	require.NoError(t, json.Unmarshal(raw, &doc))
	assert.Equal(t, map[string]string{shard0: seqs[1]}, doc.Delivered)

	out, err = runCLI(ctx, args("delete", "--yes")...)
	require.NoError(t, err, out)
	got, err := s.Delivered(ctx)
	require.NoError(t, err)
	require.Empty(t, got, "delete removes the marks")
	out, err = runCLI(ctx, args("reset", "--to", "sequences="+file, "--yes")...)
	require.NoError(t, err, out)
	got, err = s.Delivered(ctx)
	require.NoError(t, err)
	assert.Equal(t, map[string]consumer.Position{shard0: {Sequence: seqs[1]}}, got)
	assert.Contains(t, out, "redelivery marks: 1 of the file's 1 moved forwards")
}
