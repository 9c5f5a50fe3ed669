package main

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/kinesis"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/connect-kinesis/connect-kinesis/internal/testenv"
)

// defaultsYAML is an instance with every lease and commit setting at its
// default: what a user who followed the README runs.
const defaultsYAML = `
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
      group: defaults
    lease:
      instance_id: %s
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

// startDefaultInstance starts the binary named name with defaultsYAML.
func startDefaultInstance(t *testing.T, dir, name string, k *testenv.Kinesis, r *testenv.Redis, stream string) *instance {
	t.Helper()
	out := filepath.Join(dir, name+".jsonl")
	conf := filepath.Join(dir, name+".yaml")
	require.NoError(t, os.WriteFile(conf, []byte(fmt.Sprintf(defaultsYAML,
		stream, testenv.Region, k.Endpoint, testenv.AccessKey, testenv.SecretKey, r.URL(), name, name, out)), 0o600))
	cmd, logf := startBinary(t, dir, name, conf, nil)
	return &instance{name: name, cmd: cmd, out: out, log: logf}
}

// logLines are the lines of an instance's log holding sub.
func logLines(t *testing.T, in *instance, sub string) []string {
	t.Helper()
	b, err := os.ReadFile(in.log.Name())
	require.NoError(t, err)
	var out []string
	for _, l := range strings.Split(string(b), "\n") {
		if strings.Contains(l, sub) {
			out = append(out, l)
		}
	}
	return out
}

// Guards issue 60 item 5: after a SIGKILL the survivor took the dead
// instance's shard without a word, and a split said nothing either. Two
// copies at the default lease settings: one is killed, the survivor says
// at INFO which shard it took from which member (one line), and when the
// parent of a split is closed it says its children are ready. It also
// measures the failover at the defaults: from the SIGKILL to the survivor's
// first delivery from the dead instance's shard.
func TestIntegrationFailoverAndSplitAreLoggedAtDefaults(t *testing.T) {
	t.Parallel()
	const stream = "failover-defaults"
	k := testenv.NewKinesisMock(t)
	r := testenv.NewRedis(t)
	k.MustCreateStream(t, stream, 2)
	client := k.Client()
	dir := t.TempDir()
	p := &producer{counter: map[string]int{}}
	p.put(t, client, stream, 100)
	a := startDefaultInstance(t, dir, "a", k, r, stream)
	b := startDefaultInstance(t, dir, "b", k, r, stream)
	insts := []*instance{a, b}

	// Each reads one shard: b's is the one it delivers from.
	var bShard string
	require.Eventually(t, func() bool {
		p.put(t, client, stream, 10)
		evs := deliveries(t, insts)
		byShard := map[string]string{}
		for _, e := range evs[max(0, len(evs)-20):] {
			byShard[e.Shard] = e.Instance
		}
		for s, in := range byShard {
			if in == "b" && len(byShard) == 2 && byShard[otherShard(byShard, s)] == "a" {
				bShard = s
				return true
			}
		}
		return false
	}, 120*time.Second, time.Second, "the two copies did not settle on one shard each")

	killed := time.Now()
	require.NoError(t, b.cmd.Process.Signal(syscall.SIGKILL))
	_ = b.cmd.Wait()
	var failover time.Duration
	require.Eventually(t, func() bool {
		p.put(t, client, stream, 10)
		for _, e := range deliveries(t, insts) {
			if e.Instance == "a" && e.Shard == bShard && e.At > killed.UnixNano() {
				failover = time.Unix(0, e.At).Sub(killed)
				return true
			}
		}
		return false
	}, 60*time.Second, 200*time.Millisecond, "a never read b's shard")
	t.Logf("failover at the defaults (lease.period 10s, rebalance_period 10s): first record of b's shard %s delivered by a %v after the SIGKILL", bShard, failover.Round(time.Millisecond))

	took := logLines(t, a, "Took over shards from members that stopped renewing their leases")
	require.Len(t, took, 1, "one INFO line for the failover")
	assert.Contains(t, took[0], "level=info")
	assert.Contains(t, took[0], "shard "+bShard+" from member b")

	// A split of a's shards: once the parent is read and closed, a says
	// its children are ready.
	parent, mid := splitPoint(t, client, stream)
	_, err := client.SplitShard(t.Context(), &kinesis.SplitShardInput{
		StreamName: aws.String(stream), ShardToSplit: aws.String(parent), NewStartingHashKey: aws.String(mid.String()),
	})
	require.NoError(t, err)
	_, err = k.WaitActive(t.Context(), stream)
	require.NoError(t, err)
	require.Eventually(t, func() bool {
		return len(logLines(t, a, "Parent shards closed")) > 0
	}, 60*time.Second, 500*time.Millisecond, "no INFO line for the split")
	split := logLines(t, a, "Parent shards closed")
	require.Len(t, split, 1)
	assert.Contains(t, split[0], "level=info")
	assert.Contains(t, split[0], "(read to their end, acknowledged and committed): "+parent+"; their children are ready to read: 2 shards (")
}

// otherShard is the key of m that is not s.
func otherShard(m map[string]string, s string) string {
	for k := range m {
		if k != s {
			return k
		}
	}
	return ""
}
