package ops

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/connect-kinesis/connect-kinesis/internal/consumer"
	"github.com/connect-kinesis/connect-kinesis/internal/testenv"
)

// TestIntegrationImportKeepsStartsAndSeesLateCommits guards issue 38 item
// 5. An import used to delete the group's start override and per-shard
// starts (so shards without a checkpoint then began at start_position),
// without a word in the dry run; and with --fence-readers, a commit a
// running reader made after the rewind check was rewound unlisted.
func TestIntegrationImportKeepsStartsAndSeesLateCommits(t *testing.T) {
	useEmulatorCredentials(t)
	k := testenv.NewKinesisMock(t)
	r := testenv.NewRedis(t)
	d := testenv.NewDynalite(t)
	rs := buildReshardedStream(t, k, "starts")
	ctx := t.Context()
	importArgs := func(group string, extra ...string) []string {
		return append([]string{"import", "--redis-url", r.URL(), "--group", group, "--stream", "starts",
			"--region", testenv.Region, "--endpoint", k.Endpoint, "--from", SourceConnect, "--table", "connect-starts",
			"--dynamodb-endpoint", d.Endpoint}, extra...)
	}
	ck1 := rs.find(t, shard1, shard1+"-before-9")
	later := rs.find(t, shard1, shard1+"-after-5")
	createTable(t, d, "connect-starts", "StreamID", "ShardID")
	putItems(t, d, "connect-starts", item{"StreamID": strAttr("starts"), "ShardID": strAttr(shard1), "SequenceNumber": strAttr(ck1.seq)})

	t.Run("the start override and per-shard starts survive, and the dry run says so", func(t *testing.T) {
		s := groupStore(t, r.URL(), "moved", rs.arn)
		at := consumer.StartOverride{Mode: consumer.StartAtTimestamp, Timestamp: time.Date(2024, 5, 1, 12, 0, 0, 0, time.UTC)}
		_, err := s.Reset(ctx, &at, nil, map[string]consumer.StartOverride{shard3: {Mode: consumer.StartTrimHorizon}}, false)
		require.NoError(t, err)

		out, err := runCLI(ctx, importArgs("moved", "--dry-run")...)
		require.NoError(t, err, out)
		t.Logf("dry run:\n%s", out)
		assert.Contains(t, out, "start override at_timestamp=2024-05-01T12:00:00Z is kept")
		assert.Contains(t, out, shard3+": (none) -> (none; starts at trim_horizon, kept)")
		assert.Contains(t, out, shard3+": no checkpoint or start in the source: keeps the group's start for it, trim_horizon")

		out, err = runCLI(ctx, importArgs("moved")...)
		require.NoError(t, err, out)
		t.Logf("import:\n%s", out)
		so, ok, err := s.StartOverride(ctx)
		require.NoError(t, err)
		assert.True(t, ok, "the start override survives the import")
		assert.Equal(t, at.String(), so.String())
		starts, err := s.ShardStarts(ctx)
		require.NoError(t, err)
		assert.Equal(t, map[string]consumer.StartOverride{shard3: {Mode: consumer.StartTrimHorizon}}, starts, "shard 3 still starts at its beginning")
		assert.Equal(t, ck1.position(), groupCheckpoints(t, r.URL(), "moved", rs.arn)[shard1])
	})

	t.Run("with --fence-readers, a commit after the check is not rewound unlisted", func(t *testing.T) {
		s := groupStore(t, r.URL(), "racing", rs.arn)
		_, err := s.Reset(ctx, nil, map[string]consumer.Position{shard1: ck1.position()}, nil, false)
		require.NoError(t, err)
		l, err := leaseOf(s.Acquire(ctx, shard1, "reader-1"))
		require.NoError(t, err)
		// The running reader commits past the imported position after the
		// import read the group's checkpoints (nothing to rewind then).
		beforeImportWrite = func() { require.NoError(t, s.Commit(ctx, l, later.position())) }
		t.Cleanup(func() { beforeImportWrite = func() {} })

		out, err := runCLI(ctx, importArgs("racing", "--fence-readers")...)
		t.Logf("import: err %v\n%s", err, out)
		require.Error(t, err, out)
		assert.Contains(t, err.Error(), shard1+": "+later.seq+" -> "+ck1.seq)
		assert.Contains(t, err.Error(), "--allow-rewind")
		assert.Equal(t, later.position(), groupCheckpoints(t, r.URL(), "racing", rs.arn)[shard1], "the reader's commit stands")
	})
}
