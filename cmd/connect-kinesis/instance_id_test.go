package main

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/connect-kinesis/connect-kinesis/internal/testenv"
)

// idYAML is an instance with a fixed lease.instance_id and a 3 s lease.
const idYAML = `
logger:
  level: info
  format: logfmt
http:
  enabled: false
input:
  kinesis:
    streams: [ %s ]
    region: %s
    endpoint: %s
    credentials: { id: %s, secret: %s }
    checkpoint:
      redis: { url: %s }
      group: ids
      commit_period: 500ms
    lease:
      instance_id: %s
      period: 3s
      rebalance_period: 1s
    shard_discovery_interval: 1s
    idle_poll_interval: 200ms
pipeline:
  processors:
    - mapping: |
        root = this
        root.shard = @kinesis_shard
        root.instance = "%s"
        root.at = timestamp_unix_nano()
output:
  file:
    path: %s
    codec: lines
`

// startWithID starts the binary as process name under instance id id.
func startWithID(t *testing.T, dir, name, id string, k *testenv.Kinesis, r *testenv.Redis, stream string) *instance {
	t.Helper()
	out := filepath.Join(dir, name+".jsonl")
	conf := filepath.Join(dir, name+".yaml")
	require.NoError(t, os.WriteFile(conf, []byte(fmt.Sprintf(idYAML,
		stream, testenv.Region, k.Endpoint, testenv.AccessKey, testenv.SecretKey, r.URL(), id, name, out)), 0o600))
	cmd, logf := startBinary(t, dir, name, conf, nil)
	return &instance{name: name, cmd: cmd, out: out, log: logf}
}

// Guards issue 60 item 1: a second process started under a running one's
// lease.instance_id read the same shards (4,372 deliveries of 3,000
// records, none marked) and said nothing. Now it logs an ERROR naming the
// id and exits non-zero, having delivered nothing, while the first reads
// every record once; and a process restarted under the id right after a
// SIGKILL takes it over once the dead one's beat lapsed, and reads on.
func TestIntegrationASecondProcessUnderOneInstanceIDIsRefused(t *testing.T) {
	t.Parallel()
	const stream = "one-id"
	k := testenv.NewKinesisMock(t)
	r := testenv.NewRedis(t)
	k.MustCreateStream(t, stream, 2)
	client := k.Client()
	dir := t.TempDir()
	p := &producer{counter: map[string]int{}}
	p.put(t, client, stream, 200)

	first := startWithID(t, dir, "first", "a", k, r, stream)
	require.Eventually(t, func() bool {
		u, _, _ := check(deliveries(t, []*instance{first}))
		return u == p.total()
	}, 60*time.Second, 200*time.Millisecond, "the first process did not read the first records")

	second := startWithID(t, dir, "second", "a", k, r, stream)
	exited := make(chan error, 1)
	go func() { exited <- second.cmd.Wait() }()
	p.put(t, client, stream, 200)
	select {
	case err := <-exited:
		var ee *exec.ExitError
		require.True(t, errors.As(err, &ee), "the second process exits with an error status: %v", err)
		assert.NotZero(t, ee.ExitCode())
	case <-time.After(30 * time.Second):
		t.Fatal("the second process under id a is still running")
	}
	refused := logLines(t, second, `is in use by another running process of group ids`)
	require.NotEmpty(t, refused, "the refusal is logged")
	assert.Contains(t, refused[0], "level=error")
	assert.Contains(t, refused[0], `lease.instance_id \"a\"`)

	require.Eventually(t, func() bool {
		u, _, _ := check(deliveries(t, []*instance{first, second}))
		return u == p.total()
	}, 60*time.Second, 200*time.Millisecond, "records written while the second ran not all delivered")
	_, dups, _ := check(deliveries(t, []*instance{first, second}))
	assert.Zero(t, dups, "nothing is read twice")
	assert.Empty(t, deliveries(t, []*instance{second}), "the refused process delivered nothing")

	// A crash and a restart under the same id at once: the new process
	// waits for the dead one's beat to lapse, then reads on.
	require.NoError(t, first.cmd.Process.Signal(syscall.SIGKILL))
	_ = first.cmd.Wait()
	killed := time.Now()
	third := startWithID(t, dir, "third", "a", k, r, stream)
	p.put(t, client, stream, 200)
	all := []*instance{first, second, third}
	require.Eventually(t, func() bool {
		u, _, _ := check(deliveries(t, all))
		return u == p.total()
	}, 60*time.Second, 200*time.Millisecond, "the restarted process did not read on")
	t.Logf("restart under the same id after a SIGKILL: every record delivered %v after the kill", time.Since(killed).Round(time.Millisecond))
	// Whether it had to wait depends on how long this machine took to
	// start it: a claim a lease period after the kill finds the dead
	// beat lapsed (the waiting itself is TestIntegrationInstanceIDIsClaimedPerProcess's).
	t.Logf("the restarted process waited for the dead one's beat: %v", len(logLines(t, third, "Took over instance id a in group ids")) > 0)
	assert.Empty(t, logLines(t, third, "is in use by another running process"), "a restart is not refused")
	_, _, violations := check(deliveries(t, all))
	assert.Zero(t, violations, "per-key order")
}
