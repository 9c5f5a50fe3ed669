package main

import (
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/connect-kinesis/connect-kinesis/internal/testenv"
	"github.com/connect-kinesis/connect-kinesis/plugins/checkpointer"
)

// aclInputFields are the input fields of the ACL tests: short periods, so
// renewals and commits happen within seconds.
var aclInputFields = []string{"lease: { period: 2s, rebalance_period: 500ms }", "idle_poll_interval: 200ms"}

// TestIntegrationACLInputUserEndToEnd runs the binary's input as the input
// user of the shipped ACL file (config/deploy/redis-acl.conf): every record
// is delivered, checkpoints are committed, leases renewed, and on SIGTERM
// the leases are handed back; `checkpoints show` runs as the viewer
// meanwhile. Redis refuses nothing (its ACL LOG stays empty).
func TestIntegrationACLInputUserEndToEnd(t *testing.T) {
	t.Parallel()
	k := testenv.SharedKinesisMock(t)
	r := testenv.NewRedis(t, testenv.RedisOptions{ShippedACL: true})
	stream := testenv.StreamName(t)
	arn := k.MustCreateStream(t, stream, 2)
	putKeyed(t, k.Client(), stream, 40)

	dir := t.TempDir()
	out := filepath.Join(dir, "out.jsonl")
	conf := writeFile(t, "in.yaml", fileInputConfig(stream, k.Endpoint, r.URLAs(testenv.ACLInput), out, aclInputFields...))
	cmd, _ := startBinary(t, dir, "reader", conf, nil)

	rc := r.Client()
	defer rc.Close()
	cfg := checkpointer.DefaultConfig()
	cfg.Group = "g" // fileInputConfig's group
	store := checkpointer.NewFromClient(rc, cfg, nil, nil).Stream(arn)
	require.Eventually(t, func() bool { return len(readLines(t, out)) >= 40 }, 60*time.Second, 100*time.Millisecond,
		"every record is read as the input's ACL user")
	require.Eventually(t, func() bool {
		ck, err := store.Checkpoints(t.Context())
		return err == nil && len(ck) == 2
	}, 30*time.Second, 100*time.Millisecond, "both shards' checkpoints are committed")
	first := leaseExpiries(t, rc, store)
	require.Len(t, first, 2, "both shards are leased")
	require.Eventually(t, func() bool {
		now := leaseExpiries(t, rc, store)
		for shard, exp := range first {
			if now[shard] <= exp {
				return false
			}
		}
		return true
	}, 30*time.Second, 100*time.Millisecond, "the leases are renewed")

	show := run(t, "checkpoints", "show", "--redis-url", r.URLAs(testenv.ACLViewer), "--group", "g",
		"--stream", stream, "--stream-id", arn)
	assert.Contains(t, show, "live members (1)", "show, as the viewer, sees the running instance")

	require.NoError(t, cmd.Process.Signal(os.Interrupt))
	require.NoError(t, cmd.Wait(), "the binary stops cleanly on SIGTERM")
	leases, err := store.Leases(t.Context())
	require.NoError(t, err)
	for shard, l := range leases {
		assert.Empty(t, l.Owner, "the lease of %s is handed back at the stop", shard)
	}
	denied, err := r.ACLDenials(t.Context())
	require.NoError(t, err)
	assert.Empty(t, denied, "Redis refused a command or key of the input or show: the shipped ACL file lacks it")
}

// leaseExpiries maps each leased shard to its lease's expiry as stored
// ("<owner>|<expiresAtMillis>|<token>"), in Redis milliseconds.
func leaseExpiries(t *testing.T, rc *redis.Client, s *checkpointer.Store) map[string]int64 {
	t.Helper()
	raw, err := rc.HGetAll(t.Context(), s.Keys().Leases).Result()
	require.NoError(t, err)
	out := map[string]int64{}
	for shard, v := range raw {
		parts := strings.Split(v, "|")
		if len(parts) == 3 && parts[0] != "" {
			out[shard], _ = strconv.ParseInt(parts[1], 10, 64)
		}
	}
	return out
}

// TestIntegrationACLMissingPermissionIsNamed takes one command away from the
// input's user and runs the binary: its connection fails, and the log says
// at ERROR which command Redis refused and where the rules are, rather than
// warning about a failed Redis call forever. HSET is needed to join the
// group; ZADD only for heartbeats, which start after the connection, and
// is found by the permission check at the connection.
func TestIntegrationACLMissingPermissionIsNamed(t *testing.T) {
	t.Parallel()
	k := testenv.SharedKinesisMock(t)
	for _, command := range []string{"HSET", "ZADD"} {
		t.Run(command, func(t *testing.T) {
			t.Parallel()
			r := testenv.NewRedis(t, testenv.RedisOptions{ShippedACL: true})
			rc := r.Client()
			defer rc.Close()
			require.NoError(t, rc.Do(t.Context(), "ACL", "SETUSER", testenv.ACLInput, "-"+strings.ToLower(command)).Err())
			stream := testenv.StreamName(t)
			k.MustCreateStream(t, stream, 1)

			dir := t.TempDir()
			conf := writeFile(t, "in.yaml", fileInputConfig(stream, k.Endpoint, r.URLAs(testenv.ACLInput), filepath.Join(dir, "out"), aclInputFields...))
			startBinary(t, dir, "reader", conf, nil)
			var line string
			require.Eventually(t, func() bool {
				line = logLineWith(filepath.Join(dir, "reader.log"), "may not run "+command)
				return line != ""
			}, 60*time.Second, 200*time.Millisecond, "the log names the refused command %s", command)
			t.Logf("%s", line)
			assert.Contains(t, line, "level=error")
			assert.Contains(t, line, "Failed to connect", "the input does not start reading without the permission")
			assert.Contains(t, line, "docs/deploy.md")
		})
	}
}

// logLineWith returns the first line of the log at path holding want.
func logLineWith(path, want string) string {
	b, _ := os.ReadFile(path)
	for _, l := range strings.Split(string(b), "\n") {
		if strings.Contains(l, want) {
			return l
		}
	}
	return ""
}
