package ops

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/kinesis"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/connect-kinesis/connect-kinesis/internal/consumer"
	"github.com/connect-kinesis/connect-kinesis/internal/testenv"
)

// undoMarker marks the docs' block of undo commands this test runs.
const undoMarker = "<!-- run by: TestIntegrationDocsUndoAResetCommandsRun -->"

// docsUndoCommands returns the command lines of the block under undoMarker
// in page, each split into arguments after `connect-kinesis checkpoints`,
// with its trailing comment dropped.
func docsUndoCommands(t *testing.T, page string) [][]string {
	t.Helper()
	raw, err := os.ReadFile(filepath.Join("..", "..", "docs", page))
	require.NoError(t, err)
	_, rest, ok := strings.Cut(string(raw), undoMarker+"\n```sh\n")
	require.True(t, ok, "%s has no undo block", page)
	block, _, _ := strings.Cut(rest, "```")
	var cmds [][]string
	for _, l := range strings.Split(strings.TrimSpace(block), "\n") {
		l, _, _ = strings.Cut(l, "#")
		args := strings.Fields(l)
		require.Equal(t, []string{"connect-kinesis", "checkpoints"}, args[:2], l)
		cmds = append(cmds, args[2:])
	}
	return cmds
}

// Guards issue 60 item 6: the docs' undo example elided its flags with
// `...`, and the whole-group export it suggests could not be restored. The
// commands of docs/operating.md and docs/checkpointer.md run as written
// (the Redis URL and the file aimed at this test's) and put the group back.
func TestIntegrationDocsUndoAResetCommandsRun(t *testing.T) {
	useEmulatorCredentials(t)
	k := testenv.NewKinesisMock(t)
	ctx := t.Context()
	arn := k.MustCreateStream(t, "orders", 1)
	out, err := k.Client().PutRecord(ctx, &kinesis.PutRecordInput{StreamName: aws.String("orders"), PartitionKey: aws.String("k"), Data: []byte("x")})
	require.NoError(t, err)
	p := consumer.Position{Sequence: *out.SequenceNumber}
	for _, page := range []string{"operating.md", "checkpointer.md"} {
		t.Run(page, func(t *testing.T) {
			r := testenv.NewRedis(t)
			_, err := groupStore(t, r.URL(), "billing", arn).Reset(ctx, nil, map[string]consumer.Position{shard0: p}, nil, false)
			require.NoError(t, err)
			dir := t.TempDir()
			cmds := docsUndoCommands(t, page)
			require.Len(t, cmds, 4)
			for i, args := range cmds {
				for j, a := range args {
					a = strings.ReplaceAll(a, "redis://localhost:6379", r.URL())
					args[j] = strings.ReplaceAll(a, "before-reset.json", filepath.Join(dir, "before-reset.json"))
				}
				args = append(args, "--region", testenv.Region, "--endpoint", k.Endpoint)
				out, err := runCLI(ctx, args...)
				switch i {
				case 1:
					require.NoError(t, err, out)
					assert.Empty(t, groupCheckpoints(t, r.URL(), "billing", arn), "the reset to latest discarded the checkpoint")
				case 2:
					require.Error(t, err, out)
					assert.Contains(t, err.Error(), "pass --yes to confirm")
					assert.Contains(t, out, shard0+": (none) -> "+p.String(), "the dry run prints the change")
					assert.Empty(t, groupCheckpoints(t, r.URL(), "billing", arn), "the dry run writes nothing")
				default:
					require.NoError(t, err, out)
				}
			}
			assert.Equal(t, p, groupCheckpoints(t, r.URL(), "billing", arn)[shard0], "the undo restored the checkpoint")
		})
	}
}
