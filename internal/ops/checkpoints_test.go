package ops

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/kinesis"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"github.com/urfave/cli/v2"

	"github.com/connect-kinesis/connect-kinesis/internal/consumer"
	"github.com/connect-kinesis/connect-kinesis/internal/testenv"
	"github.com/connect-kinesis/connect-kinesis/plugins/checkpointer"
)

// cliMu runs one in-process command at a time: urfave/cli's help flag is a
// package variable that every command's flag parsing writes to, so two
// parallel tests running commands race on it (seen under -race in CI).
var cliMu sync.Mutex

// runCLI runs `connect-kinesis checkpoints args...` in-process and returns
// what it printed.
func runCLI(ctx context.Context, args ...string) (string, error) {
	cliMu.Lock()
	defer cliMu.Unlock()
	var out bytes.Buffer
	app := &cli.App{
		Name:           "connect-kinesis",
		Commands:       []*cli.Command{CheckpointsCommand()},
		Writer:         &out,
		ErrWriter:      &out,
		ExitErrHandler: func(*cli.Context, error) {},
	}
	err := app.RunContext(ctx, append([]string{"connect-kinesis", "checkpoints"}, args...))
	return out.String(), err
}

// useEmulatorCredentials gives the command, which takes its AWS credentials
// from the SDK's chain, the emulators' keys and no shared config files.
func useEmulatorCredentials(t *testing.T) {
	t.Helper()
	t.Setenv("AWS_ACCESS_KEY_ID", testenv.AccessKey)
	t.Setenv("AWS_SECRET_ACCESS_KEY", testenv.SecretKey)
	t.Setenv("AWS_CONFIG_FILE", filepath.Join(t.TempDir(), "none"))
	t.Setenv("AWS_SHARED_CREDENTIALS_FILE", filepath.Join(t.TempDir(), "none"))
}

func TestIntegrationCLI(t *testing.T) {
	useEmulatorCredentials(t)
	k := testenv.NewKinesisMock(t)
	r := testenv.NewRedis(t, testenv.RedisOptions{Password: "cli-secret"})
	ctx := t.Context()

	arn := k.MustCreateStream(t, "orders", 2)
	require.NotEmpty(t, arn)
	// Split shard 0 so the stream has a closed parent and two children.
	_, err := k.Client().SplitShard(ctx, &kinesis.SplitShardInput{
		StreamName:         aws.String("orders"),
		ShardToSplit:       aws.String("shardId-000000000000"),
		NewStartingHashKey: aws.String("85070591730234615865843651857942052864"),
	})
	require.NoError(t, err)
	_, err = k.WaitActive(ctx, "orders")
	require.NoError(t, err)

	// A pipeline of the group: it reads shard 1 and has finished shard 0.
	cfg := checkpointer.DefaultConfig()
	cfg.RedisURL, cfg.Group = r.URL(), "billing"
	cp, err := checkpointer.New(ctx, cfg, nil, nil)
	require.NoError(t, err)
	defer cp.Close()
	s := cp.Stream(arn)
	require.NoError(t, s.Heartbeat(ctx, "host-a-1234"))
	l1, err := leaseOf(s.Acquire(ctx, "shardId-000000000001", "host-a-1234"))
	require.NoError(t, err)
	p, _ := consumer.ParsePosition("49590338271490256608559692538361571095921575989136588898")
	require.NoError(t, s.Commit(ctx, l1, p))

	base := []string{"--redis-url", r.URL(), "--group", "billing", "--stream", "orders",
		"--region", testenv.Region, "--endpoint", k.Endpoint}
	with := func(sub string, extra ...string) []string {
		return append(append([]string{sub}, base...), extra...)
	}

	t.Run("show prints shards, states and members", func(t *testing.T) {
		out, err := runCLI(ctx, with("show")...)
		require.NoError(t, err, out)
		assert.Contains(t, out, "key identity: "+arn)
		assert.NotContains(t, out, "cli-secret")
		lines := map[string]string{}
		for _, line := range strings.Split(out, "\n") {
			if f := strings.Fields(line); len(f) > 0 && strings.HasPrefix(f[0], "shardId-") {
				lines[f[0]] = line
			}
		}
		require.Len(t, lines, 4, out)
		assert.Regexp(t, `shardId-000000000000\s+ready\s+-\s+\(unowned\)`, lines["shardId-000000000000"])
		assert.Regexp(t, `shardId-000000000001\s+open\s+-\s+host-a-1234\s+\S+s\s+1\s+49590338271490256608559692538361571095921575989136588898`, lines["shardId-000000000001"])
		assert.Regexp(t, `shardId-000000000002\s+waiting-for-parents\s+shardId-000000000000`, lines["shardId-000000000002"])
		assert.Regexp(t, `shardId-000000000003\s+waiting-for-parents\s+shardId-000000000000`, lines["shardId-000000000003"])
		assert.Contains(t, out, "live members (1):\n  host-a-1234")
	})

	t.Run("show --json; the stream's ARN reaches the same keys", func(t *testing.T) {
		l0, err := leaseOf(s.Acquire(ctx, "shardId-000000000000", "host-a-1234"))
		require.NoError(t, err)
		require.NoError(t, s.CloseShard(ctx, l0))
		out, err := runCLI(ctx, "show", "--json", "--redis-url", r.URL(), "--group", "billing",
			"--stream", arn, "--region", testenv.Region, "--endpoint", k.Endpoint)
		require.NoError(t, err, out)
		var rep ShowReport
		require.NoError(t, json.Unmarshal([]byte(out), &rep), out)
		assert.Equal(t, arn, rep.StreamID)
		states := map[string]string{}
		for _, row := range rep.Shards {
			states[row.Shard] = row.State + " " + row.Checkpoint
		}
		assert.Equal(t, map[string]string{
			"shardId-000000000000": "closed SHARD_END",
			"shardId-000000000001": "open 49590338271490256608559692538361571095921575989136588898",
			"shardId-000000000002": "ready ",
			"shardId-000000000003": "ready ",
		}, states)
	})

	t.Run("show: lag and last read as the owner published them; unowned ready shards", func(t *testing.T) {
		require.NoError(t, s.PublishProgress(ctx, "host-a-1234", map[string]consumer.Progress{
			"shardId-000000000001": {LagMillis: 2500, LastDelivered: time.Now().Add(-3 * time.Second), BytesPerSecond: 64000},
		}))
		out, err := runCLI(ctx, with("show")...)
		require.NoError(t, err, out)
		assert.Regexp(t, `shardId-000000000001\s+open\s+.*\s+2\.5s\s+3(\.\d)?s ago\s+-`, out)
		assert.Regexp(t, `shardId-000000000002\s+ready\s+shardId-000000000000\s+\(unowned\)\s+-\s+-\s+-\s+-\s+-\s+-`, out)
		assert.Contains(t, out, "2 ready shards have no owner, so nobody reads them: shardId-000000000002, shardId-000000000003")

		out, err = runCLI(ctx, with("show", "--json")...)
		require.NoError(t, err, out)
		var rep ShowReport
		require.NoError(t, json.Unmarshal([]byte(out), &rep), out)
		for _, row := range rep.Shards {
			switch row.Shard {
			case "shardId-000000000001":
				require.NotNil(t, row.LagMillis)
				assert.Equal(t, int64(2500), *row.LagMillis)
				assert.NotNil(t, row.LastDelivered)
				if assert.NotNil(t, row.BytesPerSecond) {
					assert.Equal(t, int64(64000), *row.BytesPerSecond)
				}
				assert.Equal(t, "host-a-1234", row.ProgressBy, "the load field is not part of the owner")
				assert.False(t, row.Unowned)
			case "shardId-000000000002":
				assert.True(t, row.Unowned)
				assert.Nil(t, row.LagMillis)
			}
		}
	})

	t.Run("show: a group with no state says so instead of listing shards", func(t *testing.T) {
		out, err := runCLI(ctx, "show", "--redis-url", r.URL(), "--group", "nobody", "--stream", "orders",
			"--region", testenv.Region, "--endpoint", k.Endpoint)
		require.NoError(t, err, out)
		assert.Contains(t, out, "group nobody has no state on this stream")
		assert.NotContains(t, out, "shardId-")
		out, err = runCLI(ctx, "show", "--json", "--redis-url", r.URL(), "--group", "nobody", "--stream", "orders",
			"--region", testenv.Region, "--endpoint", k.Endpoint)
		require.NoError(t, err, out)
		assert.Contains(t, out, `"no_state": true`)
	})

	t.Run("show --watch redraws every second until stopped", func(t *testing.T) {
		out := &syncWriter{}
		wctx, stop := context.WithCancel(ctx)
		defer stop()
		app := &cli.App{Name: "connect-kinesis", Commands: []*cli.Command{CheckpointsCommand()}, Writer: out, ErrWriter: out,
			ExitErrHandler: func(*cli.Context, error) {}}
		done := make(chan error, 1)
		go func() {
			cliMu.Lock()
			defer cliMu.Unlock()
			done <- app.RunContext(wctx, append([]string{"connect-kinesis", "checkpoints"}, with("show", "--watch")...))
		}()
		require.Eventually(t, func() bool { return strings.Count(out.String(), "(Ctrl-C to stop)") >= 3 }, 15*time.Second, 50*time.Millisecond)
		stop()
		select {
		case err := <-done:
			require.NoError(t, err)
		case <-time.After(5 * time.Second):
			t.Fatal("--watch did not stop when its context ended")
		}
		frames := strings.Split(out.String(), "\033[H\033[2J")
		assert.GreaterOrEqual(t, len(frames), 4, "each frame clears the screen first")
		assert.Contains(t, frames[len(frames)-1], "shardId-000000000001")
	})

	t.Run("reset refuses while a lease is live, then fences it with --force", func(t *testing.T) {
		out, err := runCLI(ctx, with("reset", "--to", "latest", "--yes")...)
		require.Error(t, err)
		assert.ErrorIs(t, err, checkpointer.ErrLiveLeases)
		assert.Contains(t, err.Error(), "shardId-000000000001")
		got, ok, err := s.Checkpoint(ctx, "shardId-000000000001")
		require.NoError(t, err)
		require.True(t, ok, "a refused reset changes nothing")
		assert.Equal(t, p, got)

		out, err = runCLI(ctx, with("reset", "--to", "latest", "--force", "--yes")...)
		require.NoError(t, err, out)
		assert.Contains(t, out, "shardId-000000000001: 49590338271490256608559692538361571095921575989136588898 -> (none)")
		assert.Contains(t, out, "closed shards cleared: 1")
		assert.Contains(t, out, "leases fenced out (forced): shardId-000000000001")
		assert.Contains(t, out, "start at: at_timestamp=")

		// `latest` is stored as the time of the reset, so every take of a
		// shard without a checkpoint starts at the same place.
		so, ok, err := s.StartOverride(ctx)
		require.NoError(t, err)
		require.True(t, ok)
		assert.Equal(t, consumer.StartAtTimestamp, so.Mode)
		assert.WithinDuration(t, time.Now().Add(-consumer.LatestSkewMargin), so.Timestamp, 2*time.Second)
		all, err := s.Checkpoints(ctx)
		require.NoError(t, err)
		assert.Empty(t, all)
		// The running pipeline is fenced: its next commit is refused.
		assert.ErrorIs(t, s.Commit(ctx, l1, p), consumer.ErrLeaseLost)
	})

	t.Run("reset to sequences from a file and from show --json", func(t *testing.T) {
		dir := t.TempDir()
		// A record of shard 2 (the lower half of shard 0's range): a
		// reset checks each position against Kinesis.
		put, err := k.Client().PutRecord(ctx, &kinesis.PutRecordInput{StreamName: aws.String("orders"),
			PartitionKey: aws.String("k"), ExplicitHashKey: aws.String("0"), Data: []byte("x")})
		require.NoError(t, err)
		require.Equal(t, "shardId-000000000002", *put.ShardId)
		seq2 := *put.SequenceNumber + "/4"
		flat := filepath.Join(dir, "seq.json")
		require.NoError(t, os.WriteFile(flat, []byte(`{"shardId-000000000000":"SHARD_END","shardId-000000000002":"`+seq2+`"}`), 0o600))
		out, err := runCLI(ctx, with("reset", "--to", "sequences="+flat, "--yes")...)
		require.NoError(t, err, out)
		assert.Contains(t, out, "shardId-000000000002: (none) -> "+seq2)
		closed, err := s.ClosedShards(ctx)
		require.NoError(t, err)
		assert.Equal(t, map[string]bool{"shardId-000000000000": true}, closed)
		_, ok, err := s.StartOverride(ctx)
		require.NoError(t, err)
		assert.False(t, ok, "a sequences reset clears the start override")

		backup, err := runCLI(ctx, with("show", "--json")...)
		require.NoError(t, err)
		bf := filepath.Join(dir, "backup.json")
		require.NoError(t, os.WriteFile(bf, []byte(backup), 0o600))
		_, err = runCLI(ctx, with("reset", "--to", "trim_horizon", "--yes")...)
		require.NoError(t, err)
		out, err = runCLI(ctx, with("reset", "--to", "sequences="+bf, "--yes")...)
		require.NoError(t, err, out)
		all, err := s.Checkpoints(ctx)
		require.NoError(t, err)
		assert.Equal(t, seq2, all["shardId-000000000002"].String())
		assert.True(t, all["shardId-000000000000"].ShardEnd)
	})

	t.Run("delete needs --yes, and refuses while instances run, even with --force", func(t *testing.T) {
		_, err := runCLI(ctx, with("delete")...)
		require.Error(t, err)
		assert.Contains(t, err.Error(), "--yes")
		// A running instance would take the deletion for a store that
		// forgot and write its state back at once: refused, naming it.
		require.NoError(t, s.Heartbeat(ctx, "host-a-1234"))
		_, err = runCLI(ctx, with("delete", "--yes", "--force")...)
		require.Error(t, err)
		assert.ErrorIs(t, err, checkpointer.ErrLiveMembers)
		assert.Contains(t, err.Error(), "host-a-1234")
		all, err := s.Checkpoints(ctx)
		require.NoError(t, err)
		assert.Len(t, all, 2, "a refused delete changes nothing")
		require.NoError(t, s.RemoveMember(ctx, "host-a-1234"))
		out, err := runCLI(ctx, with("delete", "--yes")...)
		require.NoError(t, err, out)
		assert.Contains(t, out, "2 checkpoints, 1 closed shards")
		n, err := r.Client().Exists(ctx, s.Keys().Checkpoints, s.Keys().Closed, s.Keys().Leases, s.Keys().Members, s.Keys().Handoff).Result()
		require.NoError(t, err)
		assert.Zero(t, n)
	})

	t.Run("clear errors", func(t *testing.T) {
		for _, tc := range []struct {
			name string
			args []string
			want string
		}{
			{"unknown stream", []string{"show", "--redis-url", r.URL(), "--group", "g", "--stream", "nope", "--region", testenv.Region, "--endpoint", k.Endpoint}, `stream "nope" not found`},
			{"unreachable redis", []string{"show", "--redis-url", "redis://:cli-secret@127.0.0.1:1", "--group", "g", "--stream", "orders", "--region", testenv.Region, "--endpoint", k.Endpoint}, "reaching Redis: dial tcp 127.0.0.1:1"},
			{"bad --to", with("reset", "--to", "yesterday"), "flag --to"},
			{"bad timestamp", with("reset", "--to", "at_timestamp=monday"), "RFC3339"},
			{"missing group", []string{"show", "--redis-url", r.URL(), "--stream", "orders"}, "group"},
			{"bad kind", with("show", "--redis-kind", "sharded"), "flag --redis-kind"},
		} {
			t.Run(tc.name, func(t *testing.T) {
				out, err := runCLI(ctx, tc.args...)
				require.Error(t, err, out)
				assert.Contains(t, err.Error(), tc.want)
				assert.NotContains(t, err.Error()+out, "cli-secret")
			})
		}
	})
}

// On kinesalite (which rejects StreamARN parameters) the stream is reached
// by name, and its key identity is still what DescribeStreamSummary names
// it, as the input resolves it.
func TestIntegrationCLIKinesalite(t *testing.T) {
	useEmulatorCredentials(t)
	k := testenv.NewKinesalite(t)
	r := testenv.NewRedis(t)
	id := k.MustCreateStream(t, "clicks", 3)
	if id == "" {
		id = "clicks"
	}

	cfg := checkpointer.DefaultConfig()
	cfg.RedisURL, cfg.Group = r.URL(), "g"
	cp, err := checkpointer.New(t.Context(), cfg, nil, nil)
	require.NoError(t, err)
	defer cp.Close()
	s := cp.Stream(id)
	l, err := leaseOf(s.Acquire(t.Context(), "shardId-000000000002", "me"))
	require.NoError(t, err)
	require.NoError(t, s.Commit(t.Context(), l, consumer.Position{Sequence: "5"}))

	out, err := runCLI(t.Context(), "show", "--redis-url", r.URL(), "--group", "g", "--stream", "clicks",
		"--region", testenv.Region, "--endpoint", k.Endpoint)
	require.NoError(t, err, out)
	assert.Contains(t, out, "key identity: "+id+"\n")
	assert.Regexp(t, `shardId-000000000002\s+open\s+-\s+me\s+\S+\s+1\s+5`, out)
	assert.Regexp(t, `shardId-000000000000\s+ready`, out)
}

func leaseOf(t consumer.Take, err error) (consumer.Lease, error) { return t.Lease, err }

// Guards issue 60 item 10: `show --stream` without a usable region failed on
// the region alone, though `show --group` needs none; the error says why a
// stream name needs Kinesis, and how to name the stream without it.
func TestShowStreamWithoutRegionSaysWhyAndTheWayAround(t *testing.T) {
	t.Parallel()
	out, err := runCLI(t.Context(), "show", "--redis-url", "redis://127.0.0.1:1", "--group", "billing", "--stream", "orders", "--region", "us east 1")
	require.Error(t, err, out)
	assert.Contains(t, err.Error(), `flag --region: "us east 1" is not an AWS region name`)
	assert.Contains(t, err.Error(), "--stream is looked up in Kinesis, for its ARN, which names the group's keys, and its shards; --stream-id with the STREAM ID `show --group` prints reads Redis alone")
}
