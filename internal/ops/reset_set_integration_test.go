package ops

import (
	"path/filepath"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/kinesis"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/connect-kinesis/connect-kinesis/internal/consumer"
	"github.com/connect-kinesis/connect-kinesis/internal/testenv"
)

// Guards issue 60 item 6: a whole-group `export --group g` could not be
// restored (`reset --to sequences=export.json` refused the set document:
// "cannot unmarshal array into Go value of type string"). Now reset reads
// it: every stream in the file, or the one --stream picks; the dry run
// prints each stream's changes and writes nothing.
func TestIntegrationWholeGroupExportRoundTripsThroughReset(t *testing.T) {
	useEmulatorCredentials(t)
	k := testenv.NewKinesisMock(t)
	r := testenv.NewRedis(t)
	ctx := t.Context()
	arnA := k.MustCreateStream(t, "set-a", 1)
	arnB := k.MustCreateStream(t, "set-b", 1)
	put := func(stream string) consumer.Position {
		out, err := k.Client().PutRecord(ctx, &kinesis.PutRecordInput{StreamName: aws.String(stream),
			PartitionKey: aws.String("k"), Data: []byte("x")})
		require.NoError(t, err)
		return consumer.Position{Sequence: *out.SequenceNumber}
	}
	pA, pB := put("set-a"), put("set-b")
	for arn, p := range map[string]consumer.Position{arnA: pA, arnB: pB} {
		_, err := groupStore(t, r.URL(), "g", arn).Reset(ctx, nil, map[string]consumer.Position{shard0: p}, nil, false)
		require.NoError(t, err)
	}
	base := []string{"--redis-url", r.URL(), "--group", "g", "--region", testenv.Region, "--endpoint", k.Endpoint}
	file := filepath.Join(t.TempDir(), "export.json")
	out, err := runCLI(ctx, append([]string{"export", "-o", file}, base...)...)
	require.NoError(t, err, out)

	// The group moves on: both streams' checkpoints are discarded.
	for _, arn := range []string{arnA, arnB} {
		_, err := groupStore(t, r.URL(), "g", arn).Reset(ctx, nil, map[string]consumer.Position{}, nil, false)
		require.NoError(t, err)
	}

	out, err = runCLI(ctx, append([]string{"reset", "--to", "sequences=" + file}, base...)...)
	require.Error(t, err, out)
	assert.Contains(t, err.Error(), "pass --yes to confirm")
	assert.Contains(t, out, "on "+arnA+" would change")
	assert.Contains(t, out, shard0+": (none) -> "+pA.String(), "the dry run prints set-a's change")
	assert.Contains(t, out, shard0+": (none) -> "+pB.String(), "the dry run prints set-b's change")
	assert.Empty(t, groupCheckpoints(t, r.URL(), "g", arnA), "nothing written")

	out, err = runCLI(ctx, append([]string{"reset", "--to", "sequences=" + file, "--stream", "set-b", "--yes"}, base...)...)
	require.NoError(t, err, out)
	assert.Equal(t, pB, groupCheckpoints(t, r.URL(), "g", arnB)[shard0], "--stream picks set-b")
	assert.Empty(t, groupCheckpoints(t, r.URL(), "g", arnA), "and leaves set-a")

	out, err = runCLI(ctx, append([]string{"reset", "--to", "sequences=" + file, "--yes"}, base...)...)
	require.NoError(t, err, out)
	assert.Equal(t, pA, groupCheckpoints(t, r.URL(), "g", arnA)[shard0], "every stream of the file is restored")
	assert.Equal(t, pB, groupCheckpoints(t, r.URL(), "g", arnB)[shard0])
}
