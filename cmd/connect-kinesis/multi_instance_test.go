package main

import (
	"bufio"
	"encoding/json"
	"fmt"
	"maps"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/kinesis"
	"github.com/aws/aws-sdk-go-v2/service/kinesis/types"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/connect-kinesis/connect-kinesis/internal/consumer"
	"github.com/connect-kinesis/connect-kinesis/internal/testenv"
	"github.com/connect-kinesis/connect-kinesis/plugins/checkpointer"
)

// Timings of the multi-instance test: short, so failover is seconds.
const (
	miLeasePeriod     = 3 * time.Second
	miRebalancePeriod = time.Second
	miCommitPeriod    = 500 * time.Millisecond
	miGroup           = "multi"
	// The input's in-flight limit: at most miShardMaxInFlight unacked
	// batches of at most miLimit records per shard. Set here (the defaults
	// are 1 and 10,000) so the duplicate bound of a crash is tight enough to
	// catch a checkpoint that stopped moving.
	miShardMaxInFlight = 1
	miLimit            = 50
)

const instanceYAML = `
logger:
  level: info
  format: logfmt
http:
  enabled: false
input:
  kinesis:
    streams: [ %s ]
    start_position: trim_horizon
    region: %s
    endpoint: %s
    credentials: { id: %s, secret: %s }
    checkpoint:
      redis: { url: %s }
      group: %s
      commit_period: %s
    lease:
      period: %s
      rebalance_period: %s
      handoff_timeout: 5s
    shard_max_in_flight: %d
    limit: %d
    shard_discovery_interval: 1s
    poll_interval: 200ms
    idle_poll_interval: 200ms
%spipeline:
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
shutdown_timeout: 10s
`

type instance struct {
	name string
	cmd  *exec.Cmd
	out  string
	log  *os.File
}

func startInstance(t *testing.T, dir, name string, k *testenv.Kinesis, r *testenv.Redis, stream string) *instance {
	t.Helper()
	return startInstanceReading(t, dir, name, k, r, stream, false)
}

// startInstanceReading starts an instance that reads with enhanced fan-out
// when efo is set: over kinesis-mock's TLS port, trusting its test CA
// (AWS_CA_BUNDLE) and reading subscriptions without the initial-response
// event kinesis-mock omits.
func startInstanceReading(t *testing.T, dir, name string, k *testenv.Kinesis, r *testenv.Redis, stream string, efo bool) *instance {
	t.Helper()
	return startInstanceOf(t, binary, dir, name, k, r, stream, efo)
}

// startInstanceOf is startInstanceReading with the binary to run.
func startInstanceOf(t *testing.T, bin, dir, name string, k *testenv.Kinesis, r *testenv.Redis, stream string, efo bool) *instance {
	t.Helper()
	out := filepath.Join(dir, name+".jsonl")
	conf := filepath.Join(dir, name+".yaml")
	endpoint, efoYAML := k.Endpoint, ""
	if efo {
		endpoint, efoYAML = k.TLSEndpoint, "    enhanced_fan_out: { enabled: true }\n"
	}
	require.NoError(t, os.WriteFile(conf, []byte(fmt.Sprintf(instanceYAML,
		stream, testenv.Region, endpoint, testenv.AccessKey, testenv.SecretKey, r.URL(), miGroup, miCommitPeriod,
		miLeasePeriod, miRebalancePeriod, miShardMaxInFlight, miLimit, efoYAML, name, out)), 0o600))
	var env []string
	if efo {
		env = append(os.Environ(), "AWS_CA_BUNDLE="+k.CAFile, consumer.EnvEmulatorNoInitialResponse+"=true")
	}
	cmd, logf := startBinaryAt(t, bin, dir, name, conf, env)
	return &instance{name: name, cmd: cmd, out: out, log: logf}
}

// startBinary runs the binary on the config file conf with its output in
// <dir>/<name>.log (env nil: this process's environment). At the end of the
// test it is killed if still running, and its log's tail is shown when the
// test failed.
func startBinary(t *testing.T, dir, name, conf string, env []string) (*exec.Cmd, *os.File) {
	t.Helper()
	return startBinaryAt(t, binary, dir, name, conf, env)
}

// startBinaryAt is startBinary running the binary at bin.
func startBinaryAt(t *testing.T, bin, dir, name, conf string, env []string) (*exec.Cmd, *os.File) {
	t.Helper()
	logf, err := os.Create(filepath.Join(dir, name+".log"))
	require.NoError(t, err)
	cmd := exec.Command(bin, "-c", conf)
	cmd.Stdout, cmd.Stderr, cmd.Env = logf, logf, env
	require.NoError(t, testenv.StartCommand("connect-kinesis", cmd))
	t.Cleanup(func() {
		if cmd.ProcessState == nil {
			_ = cmd.Process.Kill()
			_ = cmd.Wait()
		}
		logf.Close()
		if t.Failed() {
			b, _ := os.ReadFile(logf.Name())
			t.Logf("log of %s (tail):\n%s", name, tail(string(b), 4000))
		}
	})
	return cmd, logf
}

func tail(s string, n int) string {
	if len(s) > n {
		return s[len(s)-n:]
	}
	return s
}

type event struct {
	K        string `json:"k"`
	C        int    `json:"c"`
	Shard    string `json:"shard"`
	Instance string `json:"instance"`
	At       int64  `json:"at"`
}

// deliveries reads every instance's output file and merges them in the
// order the records were delivered (one clock: all run on this machine).
func deliveries(t *testing.T, insts []*instance) []event {
	t.Helper()
	var all []event
	for _, in := range insts {
		f, err := os.Open(in.out)
		if os.IsNotExist(err) {
			continue
		}
		require.NoError(t, err)
		sc := bufio.NewScanner(f)
		for sc.Scan() {
			var e event
			if json.Unmarshal(sc.Bytes(), &e) == nil && e.K != "" {
				all = append(all, e)
			}
		}
		f.Close()
	}
	sort.SliceStable(all, func(i, j int) bool { return all[i].At < all[j].At })
	return all
}

type producer struct {
	mu      sync.Mutex
	counter map[string]int
}

// put writes n records over keys k0..k29, each key's counter increasing.
func (p *producer) put(t *testing.T, c *kinesis.Client, stream string, n int) {
	t.Helper()
	p.mu.Lock()
	defer p.mu.Unlock()
	for done := 0; done < n; {
		var entries []types.PutRecordsRequestEntry
		for ; done < n && len(entries) < 100; done++ {
			k := fmt.Sprintf("k%d", done%30)
			p.counter[k]++
			data, _ := json.Marshal(event{K: k, C: p.counter[k]})
			entries = append(entries, types.PutRecordsRequestEntry{Data: data, PartitionKey: aws.String(k)})
		}
		// Kinesis-mock accepts whole requests; a partial failure would be an
		// emulator fault worth failing on.
		out, err := c.PutRecords(t.Context(), &kinesis.PutRecordsInput{StreamName: aws.String(stream), Records: entries})
		require.NoError(t, err)
		require.Zero(t, aws.ToInt32(out.FailedRecordCount))
	}
}

func (p *producer) total() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	n := 0
	for _, c := range p.counter {
		n += c
	}
	return n
}

// check returns unique deliveries, duplicates and per-key order violations of
// first deliveries.
func check(evs []event) (unique, dups, violations int) {
	seen := map[string]bool{}
	last := map[string]int{}
	for _, e := range evs {
		id := fmt.Sprintf("%s/%d", e.K, e.C)
		if seen[id] {
			dups++
			continue
		}
		seen[id] = true
		if e.C <= last[e.K] {
			violations++
		}
		last[e.K] = e.C
	}
	return len(seen), dups, violations
}

func owners(t *testing.T, store *checkpointer.Store) map[string]int {
	t.Helper()
	leases, err := store.Leases(t.Context())
	require.NoError(t, err)
	out := map[string]int{}
	for _, l := range leases {
		if !l.Expired && l.Owner != "" {
			out[l.Owner]++
		}
	}
	return out
}

func ownerSummary(m map[string]int) string {
	parts := make([]string, 0, len(m))
	for _, o := range slices.Sorted(maps.Keys(m)) {
		parts = append(parts, fmt.Sprintf("%s:%d", o, m[o]))
	}
	return strings.Join(parts, " ")
}

// miSetup starts kinesis-mock and Redis, creates stream with the given
// shards, and returns the group's store for checking checkpoints and leases,
// and a folder for the instances' files.
func miSetup(t *testing.T, stream string, shards int) (*testenv.Kinesis, *testenv.Redis, *checkpointer.Store, string) {
	t.Helper()
	k := testenv.NewKinesisMock(t)
	r := testenv.NewRedis(t)
	arn := k.MustCreateStream(t, stream, shards)
	ckCfg := checkpointer.DefaultConfig()
	ckCfg.Group = miGroup
	ckCfg.LeasePeriod = miLeasePeriod
	rc := r.Client()
	t.Cleanup(func() { rc.Close() })
	return k, r, checkpointer.NewFromClient(rc, ckCfg, nil, nil).Stream(arn), t.TempDir()
}

// TestIntegrationMultiInstanceProcesses runs three copies of the binary on one
// group: they balance the shards, a SIGTERM hands shards off without
// duplicates, and a SIGKILLed instance's shards resume elsewhere within
// lease.period + rebalance_period with nothing lost.
func TestIntegrationMultiInstanceProcesses(t *testing.T) {
	t.Parallel()
	const stream = "multi-instance"
	k, r, store, dir := miSetup(t, stream, 6)
	client := k.Client()

	p := &producer{counter: map[string]int{}}
	p.put(t, client, stream, 600)

	var insts []*instance
	for _, name := range []string{"a", "b", "c"} {
		insts = append(insts, startInstance(t, dir, name, k, r, stream))
	}
	started := time.Now()

	// Balanced: each of the three owns two of the six shards.
	require.Eventually(t, func() bool {
		o := owners(t, store)
		return len(o) == 3 && allEqual(o, 2)
	}, 30*time.Second, 100*time.Millisecond, "shards not balanced 2/2/2: %v", func() string { return ownerSummary(owners(t, store)) })
	t.Logf("balanced 2/2/2 after %v: %s", time.Since(started).Round(time.Millisecond), ownerSummary(owners(t, store)))

	require.Eventually(t, func() bool {
		u, _, _ := check(deliveries(t, insts))
		return u == p.total()
	}, 60*time.Second, 200*time.Millisecond, "first 600 records not all delivered")

	// SIGTERM c: it commits and hands its shards off; nothing is delivered twice.
	require.NoError(t, insts[2].cmd.Process.Signal(syscall.SIGTERM))
	require.NoError(t, insts[2].cmd.Wait())
	p.put(t, client, stream, 600)
	require.Eventually(t, func() bool {
		u, _, _ := check(deliveries(t, insts))
		return u == p.total()
	}, 60*time.Second, 200*time.Millisecond, "records after SIGTERM not all delivered")
	_, dups, violations := check(deliveries(t, insts))
	assert.Zero(t, dups, "a graceful stop duplicates nothing")
	assert.Zero(t, violations, "per-key order")
	o := owners(t, store)
	assert.Len(t, o, 2, "the two live instances own every shard: %s", ownerSummary(o))

	// SIGKILL b: its leases expire and a takes them over.
	bShards := slices.Max(slices.Collect(maps.Values(o))) // b's share; both hold 3
	killed := time.Now()
	require.NoError(t, insts[1].cmd.Process.Signal(syscall.SIGKILL))
	_ = insts[1].cmd.Wait()
	p.put(t, client, stream, 600)
	var failover time.Duration
	require.Eventually(t, func() bool {
		o := owners(t, store)
		if len(o) == 1 && allEqual(o, 6) {
			failover = time.Since(killed)
			return true
		}
		return false
	}, 60*time.Second, 100*time.Millisecond, "a did not take over every shard")
	t.Logf("failover after SIGKILL: all 6 shards owned by a after %v", failover.Round(time.Millisecond))
	// The design's bound is lease.period + rebalance_period; the slack covers
	// a loaded CI machine.
	assert.LessOrEqual(t, failover, miLeasePeriod+miRebalancePeriod+5*time.Second)

	require.Eventually(t, func() bool {
		u, _, _ := check(deliveries(t, insts))
		return u == p.total()
	}, 60*time.Second, 200*time.Millisecond, "records after SIGKILL not all delivered")
	evs := deliveries(t, insts)
	unique, dups, violations := check(evs)
	assert.Equal(t, p.total(), unique, "nothing lost")
	assert.Zero(t, violations, "per-key order of first deliveries")

	// A crash delivers again at most what the killed instance delivered
	// since its last commit plus what it had in flight:
	//   - commits run every commit_period, so "since its last commit" is the
	//     records b delivered in the commit_period before the kill (its
	//     observed rate there × commit_period), widened by a second for a
	//     commit running late on a loaded machine;
	//   - in flight is at most shard_max_in_flight batches of `limit`
	//     records on each shard b held.
	// A checkpoint that stopped moving would redeliver all b ever read
	// (hundreds of records), well above this.
	window := miCommitPeriod + time.Second
	recent := deliveredBetween(evs, "b", killed.Add(-window), killed)
	bound := recent + miShardMaxInFlight*miLimit*bShards
	t.Logf("written %d, delivered unique %d, duplicates %d; bound %d (b delivered %d in the %v before the kill, + %d×%d×%d in flight)",
		p.total(), unique, dups, bound, recent, window, miShardMaxInFlight, miLimit, bShards)
	assert.LessOrEqual(t, dups, bound, "duplicates after a crash exceed what the killed instance delivered since its last commit plus in flight")
}

// deliveredBetween counts the records instance delivered (reached its
// output) between from and to.
func deliveredBetween(evs []event, instance string, from, to time.Time) int {
	n := 0
	for _, e := range evs {
		if e.Instance == instance && e.At >= from.UnixNano() && e.At <= to.UnixNano() {
			n++
		}
	}
	return n
}

func allEqual(m map[string]int, n int) bool {
	for _, v := range m {
		if v != n {
			return false
		}
	}
	return true
}

// Two instances read with enhanced fan-out; one is SIGKILLed mid-stream.
// The other takes its shards over and resubscribes after their
// checkpoints: nothing is lost and each key stays in order.
func TestIntegrationMultiInstanceEnhancedFanOutSIGKILL(t *testing.T) {
	t.Parallel()
	const stream = "multi-efo"
	k, r, store, dir := miSetup(t, stream, 4)
	client := k.Client()

	p := &producer{counter: map[string]int{}}
	p.put(t, client, stream, 400)
	insts := []*instance{
		startInstanceReading(t, dir, "a", k, r, stream, true),
		startInstanceReading(t, dir, "b", k, r, stream, true),
	}
	require.Eventually(t, func() bool {
		o := owners(t, store)
		return len(o) == 2 && allEqual(o, 2)
	}, 60*time.Second, 100*time.Millisecond, "shards not balanced 2/2: %v", func() string { return ownerSummary(owners(t, store)) })
	require.Eventually(t, func() bool {
		u, _, _ := check(deliveries(t, insts))
		return u == p.total()
	}, 60*time.Second, 200*time.Millisecond, "first records not all delivered")

	// Kill b while records keep arriving, over a few seconds as on a live
	// stream.
	p.put(t, client, stream, 200)
	require.NoError(t, insts[1].cmd.Process.Signal(syscall.SIGKILL))
	_ = insts[1].cmd.Wait()
	for range 4 {
		p.put(t, client, stream, 100)
		time.Sleep(time.Second)
	}
	require.Eventually(t, func() bool {
		o := owners(t, store)
		return len(o) == 1 && allEqual(o, 4)
	}, 60*time.Second, 100*time.Millisecond, "a did not take over every shard")
	// b's subscriptions hold its shards until the emulator notices b gone.
	require.Eventually(t, func() bool {
		u, _, _ := check(deliveries(t, insts))
		return u == p.total()
	}, testenv.SubscriptionHeldAtMost+time.Minute, 200*time.Millisecond, "records after SIGKILL not all delivered")
	unique, dups, violations := check(deliveries(t, insts))
	assert.Equal(t, p.total(), unique, "nothing lost")
	assert.Zero(t, violations, "per-key order of first deliveries")
	t.Logf("written %d, delivered unique %d, duplicates %d", p.total(), unique, dups)
}
