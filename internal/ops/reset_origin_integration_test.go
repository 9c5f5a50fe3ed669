package ops

import (
	"encoding/json"
	"fmt"
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

// TestIntegrationResetRefusesAnotherStreamsExport guards issue 38 item 4:
// shard ids are the same in every stream, so an export of stream A (or of
// another group) restored with `reset --to sequences=` onto stream B used
// to succeed silently, leaving each shard on a position its stream does not
// hold. Now a file of another stream or group is refused unless
// --allow-other-origin, and positions that are not records of the target
// stream are refused as import refuses them.
func TestIntegrationResetRefusesAnotherStreamsExport(t *testing.T) {
	useEmulatorCredentials(t)
	k := testenv.NewKinesisMock(t)
	r := testenv.NewRedis(t)
	ctx := t.Context()
	arnA := k.MustCreateStream(t, "origin-a", 1)
	arnB := k.MustCreateStream(t, "origin-b", 1)
	put := func(stream string) string {
		out, err := k.Client().PutRecord(ctx, &kinesis.PutRecordInput{StreamName: aws.String(stream),
			PartitionKey: aws.String("k"), Data: []byte("x")})
		require.NoError(t, err)
		return *out.SequenceNumber
	}
	// A's second record: kinesis-mock numbers records from a shard's
	// creation time and their place in the shard, so two streams made in
	// the same second have records of the same sequence number (Kinesis'
	// differ). B holds one record, so it has none numbered like A's second.
	put("origin-a")
	seqA := put("origin-a")
	put("origin-b")

	args := func(sub, stream, group string, extra ...string) []string {
		return append([]string{sub, "--redis-url", r.URL(), "--group", group, "--stream", stream,
			"--region", testenv.Region, "--endpoint", k.Endpoint}, extra...)
	}
	// Group g on stream A has a checkpoint; export it.
	_, err := groupStore(t, r.URL(), "g", arnA).Reset(ctx, nil, map[string]consumer.Position{shard0: {Sequence: seqA}}, nil, false)
	require.NoError(t, err)
	file := filepath.Join(t.TempDir(), "a.json")
	out, err := runCLI(ctx, args("export", "origin-a", "g", "-o", file)...)
	require.NoError(t, err, out)

	t.Run("an export of another stream is refused, naming the flag", func(t *testing.T) {
		out, err := runCLI(ctx, args("reset", "origin-b", "g", "--to", "sequences="+file, "--yes")...)
		require.Error(t, err, out)
		t.Logf("error: %v", err)
		assert.Contains(t, err.Error(), "stream "+arnA)
		assert.Contains(t, err.Error(), "--allow-other-origin")
	})

	t.Run("an export of another group is refused, naming the flag", func(t *testing.T) {
		out, err := runCLI(ctx, args("reset", "origin-a", "h", "--to", "sequences="+file, "--yes")...)
		require.Error(t, err, out)
		t.Logf("error: %v", err)
		assert.Contains(t, err.Error(), "group g")
		assert.Contains(t, err.Error(), "--allow-other-origin")
		assert.Empty(t, groupCheckpoints(t, r.URL(), "h", arnA), "nothing written")

		out, err = runCLI(ctx, args("reset", "origin-a", "h", "--to", "sequences="+file, "--yes", "--allow-other-origin")...)
		require.NoError(t, err, out)
		assert.Equal(t, consumer.Position{Sequence: seqA}, groupCheckpoints(t, r.URL(), "h", arnA)[shard0], "the same stream's positions are restored")
	})

	t.Run("positions that are not records of the stream are refused", func(t *testing.T) {
		// A flat file carries no stream: Kinesis tells.
		flat := filepath.Join(t.TempDir(), "flat.json")
		raw, err := json.Marshal(map[string]string{shard0: seqA})
		require.NoError(t, err)
		require.NoError(t, os.WriteFile(flat, raw, 0o600))
		out, err := runCLI(ctx, args("reset", "origin-b", "g", "--to", "sequences="+flat, "--yes")...)
		require.Error(t, err, out)
		t.Logf("error: %v", err)
		assert.Contains(t, err.Error(), fmt.Sprintf("%s: %s", shard0, seqA))
		assert.Contains(t, err.Error(), "not records of stream origin-b")
		assert.Empty(t, groupCheckpoints(t, r.URL(), "g", arnB), "nothing written")

		// With the flag, the stream check is skipped but not Kinesis'.
		out, err = runCLI(ctx, args("reset", "origin-b", "g", "--to", "sequences="+file, "--yes", "--allow-other-origin")...)
		require.Error(t, err, out)
		assert.Contains(t, err.Error(), "not records of stream origin-b")
	})
}
