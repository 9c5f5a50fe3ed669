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
	"github.com/connect-kinesis/connect-kinesis/plugins/checkpointer"
)

// TestIntegrationCLIACLUsers runs every `checkpoints` subcommand as the
// user of the shipped ACL file (config/deploy/redis-acl.conf) that
// docs/deploy.md names for it: show and export as the viewer; reset,
// import and delete as the admin. Each succeeds and Redis refuses nothing
// (its ACL LOG stays empty). Then the rules are shown tight: the viewer
// cannot reset or delete, and no user reaches keys of another prefix.
func TestIntegrationCLIACLUsers(t *testing.T) {
	useEmulatorCredentials(t)
	k := testenv.NewKinesisMock(t)
	r := testenv.NewRedis(t, testenv.RedisOptions{ShippedACL: true})
	d := testenv.NewDynalite(t)
	ctx := t.Context()
	arn := k.MustCreateStream(t, "acl", 1)
	put, err := k.Client().PutRecord(ctx, &kinesis.PutRecordInput{StreamName: aws.String("acl"),
		PartitionKey: aws.String("k"), Data: []byte("x")})
	require.NoError(t, err)
	seq := aws.ToString(put.SequenceNumber)

	// A pipeline of the group, as the input's user, committed and stopped.
	cfg := checkpointer.DefaultConfig()
	cfg.RedisURL, cfg.Group = r.URLAs(testenv.ACLInput), "billing"
	cp, err := checkpointer.New(ctx, cfg, nil, nil)
	require.NoError(t, err)
	defer cp.Close()
	s := cp.Stream(arn)
	_, err = s.Join(ctx)
	require.NoError(t, err)
	require.NoError(t, s.Heartbeat(ctx, "host-a"))
	l, err := leaseOf(s.Acquire(ctx, shard0, "host-a"))
	require.NoError(t, err)
	p, _ := consumer.ParsePosition(seq)
	require.NoError(t, s.Commit(ctx, l, p))
	require.NoError(t, s.Release(ctx, l))
	require.NoError(t, s.RemoveMember(ctx, "host-a"))

	as := func(user, sub string, extra ...string) []string {
		return append([]string{sub, "--redis-url", r.URLAs(user), "--group", "billing", "--stream", "acl",
			"--region", testenv.Region, "--endpoint", k.Endpoint}, extra...)
	}
	cli := func(args ...string) string {
		t.Helper()
		out, err := runCLI(ctx, args...)
		require.NoError(t, err, "checkpoints %v:\n%s", args, out)
		return out
	}
	exported := filepath.Join(t.TempDir(), "export.json")
	const table = "kcl-acl"
	createTable(t, d, table, "leaseKey", "")
	putItems(t, d, table, kclLeaseItem(shard0, seq, 0))

	out := cli(as(testenv.ACLViewer, "show")...)
	assert.Contains(t, out, seq)
	cli(as(testenv.ACLViewer, "show", "--json")...)
	cli(as(testenv.ACLViewer, "export", "--output", exported)...)
	cli(as(testenv.ACLAdmin, "reset", "--to", "trim_horizon", "--yes")...)
	cli(as(testenv.ACLAdmin, "reset", "--to", "latest", "--yes")...)
	cli(as(testenv.ACLAdmin, "reset", "--to", "sequences="+exported, "--yes")...)
	cli(as(testenv.ACLAdmin, "import", "--from", SourceKCL, "--table", table, "--dynamodb-endpoint", d.Endpoint, "--allow-rewind")...)
	cli(as(testenv.ACLAdmin, "show")...)
	denied, err := r.ACLDenials(ctx)
	require.NoError(t, err)
	assert.Empty(t, denied, "Redis refused a command or key of show, export, reset or import: the shipped ACL file lacks it")

	// The viewer may change nothing: Redis refuses, the error names the
	// command and where the rules are, and the checkpoint stays.
	before, _, err := s.Checkpoint(ctx, shard0)
	require.NoError(t, err)
	for _, args := range [][]string{
		as(testenv.ACLViewer, "reset", "--to", "trim_horizon", "--yes"),
		as(testenv.ACLViewer, "delete", "--yes"),
	} {
		out, err := runCLI(ctx, args...)
		require.Error(t, err, "checkpoints %v as the viewer:\n%s", args, out)
		assert.ErrorIs(t, err, checkpointer.ErrNoPermission)
		assert.Contains(t, err.Error(), "the Redis user may not run")
		assert.Contains(t, err.Error(), "docs/deploy.md")
	}
	got, _, err := s.Checkpoint(ctx, shard0)
	require.NoError(t, err)
	assert.Equal(t, before, got, "the viewer's refused commands changed nothing")

	// No user reaches keys outside the prefix its rule names.
	out, err = runCLI(ctx, as(testenv.ACLAdmin, "show", "--key-prefix", "other")...)
	require.Error(t, err, out)
	assert.ErrorIs(t, err, checkpointer.ErrNoPermission)
	assert.Contains(t, err.Error(), "may not access the keys of")

	cli(as(testenv.ACLAdmin, "delete", "--yes")...)
	viewer := cfg
	viewer.RedisURL = r.URLAs(testenv.ACLViewer)
	vcp, err := checkpointer.New(ctx, viewer, nil, nil)
	require.NoError(t, err)
	defer vcp.Close()
	has, err := vcp.Stream(arn).HasState(ctx)
	require.NoError(t, err)
	assert.False(t, has, "delete as the admin removed the group's keys")
}
