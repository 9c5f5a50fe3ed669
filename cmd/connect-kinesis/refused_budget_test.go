package main

import (
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/connect-kinesis/connect-kinesis/internal/testenv"
)

// Environment of the e2ehook build (internal/consumer/reader/e2ehook.go):
// how long the reader holds a hand-over between its lease check and its
// send, and which hand-over of the process it holds.
const (
	e2eHoldBeforeSendEnv = "CONNECT_KINESIS_E2E_HOLD_BEFORE_SEND"
	e2eHoldSendEnv       = "CONNECT_KINESIS_E2E_HOLD_SEND"
)

// e2eHookBinEnv names a binary built with `-tags e2ehook` (`make unit`
// builds bin/connect-kinesis-e2ehook and names it here); without it the
// first test that needs one builds it.
const e2eHookBinEnv = "CONNECT_KINESIS_E2EHOOK_BIN"

var (
	e2eHookOnce sync.Once
	e2eHookBin  string
	e2eHookErr  error
	e2eHookDir  string
)

// e2eHookBinary is the connect-kinesis built with the e2ehook tag: the
// one CONNECT_KINESIS_E2EHOOK_BIN names, or one built once for this run
// (removed by TestMain).
func e2eHookBinary(t *testing.T) string {
	t.Helper()
	if bin := os.Getenv(e2eHookBinEnv); bin != "" {
		return bin
	}
	e2eHookOnce.Do(func() {
		e2eHookDir, e2eHookErr = os.MkdirTemp("", "connect-kinesis-e2ehook-")
		if e2eHookErr != nil {
			return
		}
		e2eHookBin = filepath.Join(e2eHookDir, "connect-kinesis-e2ehook")
		build := exec.Command("go", "build", "-tags", "e2ehook", "-trimpath", "-o", e2eHookBin, ".")
		build.Env = append(os.Environ(), "CGO_ENABLED=0")
		if out, err := build.CombinedOutput(); err != nil {
			e2eHookErr = fmt.Errorf("building connect-kinesis with -tags e2ehook: %w: %s", err, out)
		}
	})
	require.NoError(t, e2eHookErr)
	return e2eHookBin
}

// removeE2EHookBinary removes the e2ehook binary this run built, if any.
func removeE2EHookBinary() {
	if e2eHookDir != "" {
		os.RemoveAll(e2eHookDir)
	}
}

// refusedBudgetYAML is the configuration of both instances of
// TestIntegrationRefusedFirstDeliveryGivesItsBudgetBack: a 3 s lease, one
// record per batch, and up to four batches of a shard in the pipeline, so
// that the reader hands over a third batch while the first two are still
// being processed.
const refusedBudgetYAML = `
logger: { level: %s, format: logfmt }
http: { address: 127.0.0.1:%d }
metrics: { prometheus: {} }
input:
  kinesis:
    streams: [ %s ]
    start_position: trim_horizon
    region: %s
    endpoint: %s
    credentials: { id: %s, secret: %s }
    checkpoint:
      redis: { url: %s }
      group: refused-budget
      commit_period: 500ms
    lease: { period: 3s, rebalance_period: 1s, handoff_timeout: 5s }
    shard_max_in_flight: 4
    limit: 1
    shard_discovery_interval: 1s
    poll_interval: 200ms
    idle_poll_interval: 200ms
pipeline:
  threads: 1
  processors:
%s    - mapping: |
        root = this
        root.shard = @kinesis_shard
        root.instance = "%s"
        root.at = timestamp_unix_nano()
output:
  file: { path: %s, codec: lines }
shutdown_timeout: 10s
`

// refusedBudgetSlowFirst is A's first processor: the stream's first
// record takes 6 s. The pipeline's one thread is busy with it, and the
// input's loop waits to pass it the second, so nobody asks for the third
// batch (held 4 s by the hook) until after its reader waits in the send.
// When the pipeline's Next then takes it, the lease's local deadline has
// passed: Admit refuses it before its reader runs again, the order that
// the leak needed.
const refusedBudgetSlowFirst = `    - switch:
        - check: this.k == "k0" && this.c == 1
          processors: [ { sleep: { duration: 6s } } ]
`

// refusedAtAdmission is in the DEBUG line the input logs when Admit
// refuses a batch in Next.
const refusedAtAdmission = "was refused at admission"

// budgetTookBack is in the ERROR line the budget's check logs when it
// finds room held once no reader holds anything (a leak it takes back).
const budgetTookBack = "once no reader held anything; it took them back"

// Guards issue 59 item 1 end to end with the real binary: a batch refused
// at admission on its first delivery (its lease's local deadline passed
// while it waited in the send) used to stay counted in the pipeline, so
// that once its reader ended its cost stayed in the input's byte budget
// for the life of the process. Instance A (the e2ehook build) reaches
// Redis through a proxy and holds its third hand-over 4 s before the send;
// the test holds A's Redis traffic meanwhile, so that A's 3 s lease passes
// its deadline and B takes the shard. The pipeline's Next takes the held
// batch after the deadline and Admit refuses it; then A's Redis traffic
// flows again, A finds the lease lost and its reader ends. A's
// kinesis_input_buffered_bytes must be 0 once it holds no shard, without
// the budget's check taking leaked room back (its ERROR line), and no
// record may be lost.
func TestIntegrationRefusedFirstDeliveryGivesItsBudgetBack(t *testing.T) {
	t.Parallel()
	hookBin := e2eHookBinary(t)
	const stream = "refused-budget"
	k, r, _, dir := miSetup(t, stream, 1)
	proxy, err := testenv.StartTCPProxy(r.Addr)
	require.NoError(t, err)
	t.Cleanup(proxy.Close)

	type copyOf struct {
		*instance
		port int
	}
	start := func(bin, name, level, redisURL, processors string, env []string) *copyOf {
		port, err := testenv.FreePort()
		require.NoError(t, err)
		out := filepath.Join(dir, name+".jsonl")
		conf := filepath.Join(dir, name+".yaml")
		require.NoError(t, os.WriteFile(conf, []byte(fmt.Sprintf(refusedBudgetYAML, level, port, stream, testenv.Region, k.Endpoint,
			testenv.AccessKey, testenv.SecretKey, redisURL, processors, name, out)), 0o600))
		cmd, logf := startBinaryAt(t, bin, dir, name, conf, env)
		return &copyOf{instance: &instance{name: name, cmd: cmd, out: out, log: logf}, port: port}
	}
	ownedRe := regexp.MustCompile(`(?m)^kinesis_input_shards_owned\{[^}]*\} (\S+)$`)
	bufferedRe := regexp.MustCompile(`(?m)^kinesis_input_buffered_bytes(?:\{[^}]*\})? (\S+)$`)
	owns := func(c *copyOf) bool { return scrapeValue(t, c.port, ownedRe) == 1 }
	serves := func(c *copyOf) bool {
		resp, err := http.Get(fmt.Sprintf("http://127.0.0.1:%d/metrics", c.port))
		if err != nil {
			return false
		}
		resp.Body.Close()
		return resp.StatusCode == http.StatusOK
	}
	logOf := func(c *copyOf) string {
		b, err := os.ReadFile(c.log.Name())
		require.NoError(t, err)
		return string(b)
	}

	env := append(os.Environ(), e2eHoldBeforeSendEnv+"=4s", e2eHoldSendEnv+"=3")
	a := start(hookBin, "a", "debug", "redis://"+proxy.Addr, refusedBudgetSlowFirst, env)
	require.Eventually(t, func() bool { return owns(a) }, 60*time.Second, 100*time.Millisecond, "a does not take the shard")
	b := start(binary, "b", "info", r.URL(), "", nil)
	require.Eventually(t, func() bool { return serves(b) }, 60*time.Second, 100*time.Millisecond, "b does not start")
	insts := []*instance{a.instance, b.instance}

	p := &producer{counter: map[string]int{}}
	p.put(t, k.Client(), stream, 10)
	require.Eventually(t, func() bool { return strings.Contains(logOf(a), "e2e hook: holding hand-over 3") }, 30*time.Second, 10*time.Millisecond,
		"a does not hold its third hand-over")
	// A's renewals hang from now on: its lease's local deadline passes
	// while its reader holds the third batch, and B takes the shard.
	proxy.Hold()
	require.Eventually(t, func() bool { return strings.Contains(logOf(a), refusedAtAdmission) }, 20*time.Second, 50*time.Millisecond,
		"no batch of a was refused at admission")
	require.Eventually(t, func() bool { return owns(b) }, 30*time.Second, 100*time.Millisecond, "b does not take a's shard")
	proxy.Release()
	require.Eventually(t, func() bool { return scrapeValue(t, a.port, ownedRe) == 0 }, 30*time.Second, 100*time.Millisecond, "a still holds the shard")

	// A holds no shard and its pipeline has acked what it took: its
	// budget is empty. The gauge must be read from A's /metrics: a
	// failed scrape or a missing series (A exited) is no empty budget.
	buffered, served := -1.0, false
	if !assert.Eventually(t, func() bool {
		buffered, served = scrapeSeries(a.port, bufferedRe)
		return served && buffered == 0
	}, 15*time.Second, 200*time.Millisecond) {
		if served {
			t.Errorf("kinesis_input_buffered_bytes of a stays %.0f once it holds no shard", buffered)
		} else {
			t.Errorf("a serves no kinesis_input_buffered_bytes once it holds no shard (exited: %v)", a.cmd.ProcessState != nil)
		}
	}
	assert.NotContains(t, logOf(a), budgetTookBack, "the budget's check had to take leaked room back")

	require.Eventually(t, func() bool {
		u, _, _ := check(deliveries(t, insts))
		return u == p.total()
	}, 60*time.Second, 200*time.Millisecond, "not all %d records delivered", p.total())
	unique, dups, _ := check(deliveries(t, insts))
	t.Logf("written %d, unique %d, lost %d, duplicates %d; a refused %d batches at admission", p.total(), unique, p.total()-unique, dups,
		strings.Count(logOf(a), refusedAtAdmission))
	assert.Zero(t, p.total()-unique, "records lost")
}

// scrapeSeries is the value of the first series re matches on the
// binary's /metrics at port, and whether the binary served one: unlike
// scrapeValue, a process that no longer answers is not read as 0.
func scrapeSeries(port int, re *regexp.Regexp) (float64, bool) {
	resp, err := http.Get(fmt.Sprintf("http://127.0.0.1:%d/metrics", port))
	if err != nil {
		return 0, false
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil || resp.StatusCode != http.StatusOK {
		return 0, false
	}
	m := re.FindSubmatch(b)
	if m == nil {
		return 0, false
	}
	v, err := strconv.ParseFloat(strings.TrimSpace(string(m[1])), 64)
	return v, err == nil
}

// Guards a default build that carries the e2ehook seam: only a binary
// built with -tags e2ehook may read the variables that hold a hand-over,
// so the default binary must not even contain their names.
func TestDefaultBinaryHasNoE2EHook(t *testing.T) {
	t.Parallel()
	b, err := os.ReadFile(binary)
	require.NoError(t, err)
	for _, name := range []string{e2eHoldBeforeSendEnv, e2eHoldSendEnv, "e2e hook:"} {
		// Not assert.NotContains: its message would print the whole binary.
		assert.False(t, strings.Contains(string(b), name), "the default binary %s contains %q: the e2ehook seam is in it", binary, name)
	}
}
