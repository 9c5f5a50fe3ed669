package main

import (
	"context"
	"fmt"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/kinesis"
	"github.com/aws/aws-sdk-go-v2/service/kinesis/types"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"gopkg.in/yaml.v3"

	"github.com/connect-kinesis/connect-kinesis/internal/testenv"
)

// The alert test's scenario. Each copy's pipeline runs one thread and sleeps
// alertSleep per message, so it processes at most 1/alertSleep = 20
// records/s. The writer puts alertWriteRate records/s over the stream's
// shards: two copies (15/s each) keep up, one alone cannot.
const (
	alertStream    = "alerts"
	alertShards    = 4
	alertGroup     = "alerts"
	alertSleep     = 50 * time.Millisecond
	alertWriteRate = 30 // records per second
	// The falling-behind threshold of the test's rules copy (the real one is
	// a minute) and the `for:` of both alerts under test (10m and 3m in the
	// real file): short, so the test takes seconds, not minutes.
	alertLagThresholdMillis = 10000
	alertFor                = "3s"
	// The survivor's and the stopped copy's lease.period; see the test.
	survivorLeasePeriod = 25 * time.Second
	stoppedLeasePeriod  = 10 * time.Second
)

const alertInstanceYAML = `
logger:
  level: info
  format: logfmt
http:
  address: 127.0.0.1:%d
metrics:
  prometheus: {}
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
      commit_period: 500ms
    lease:
      instance_id: %s
      period: %s
      rebalance_period: 1s
      # The scenario below is the count rule's: two copies at 2 shards each,
      # and a survivor that still counts the dead copy stays at 2. Balancing
      # by load may move a shard once the copies' bytes/s even out that way
      # (3 and 1), and the kill then leaves 1 shard unowned, not 2: seen in
      # one fresh-clone run of 7.
      balance: count
      handoff_timeout: 5s
    shard_max_in_flight: 1
    limit: 20
    shard_discovery_interval: 1s
    poll_interval: 200ms
    idle_poll_interval: 200ms
pipeline:
  threads: 1
  processors:
    - sleep: { duration: %s }
output:
  drop: {}
shutdown_timeout: 10s
`

// TestIntegrationAlertsFireOnRealPrometheus runs a real Prometheus server
// that scrapes two copies of the binary reading one stream in one group and
// evaluates config/alerts/kinesis.rules.yaml. One copy is SIGKILLed while
// writes continue: the shard-without-owner alert fires while its shards
// have no reader, and the falling-behind alert fires once the survivor,
// which alone cannot keep up, holds every shard.
//
// Why the two copies have different lease periods: with equal settings a
// dead copy's shards never count as unowned. kinesis_input_shards_unowned
// leaves out shards under another copy's live lease, and the dead copy's
// membership lapses together with its leases, so the survivor takes the
// shards in the very balancing round they become free. The gap is at most
// lease.period + rebalance_period, shorter than any sensible `for:`, and
// the gauge rightly stays 0. The alert is for shards that stay unread while
// copies run. A survivor with a longer lease.period than the dead copy (the
// mismatch docs/deploy.md warns against, e.g. half-way through a rollout
// that changes it) produces that for real: it counts the dead copy as a
// live member for its own period, so it stays at its fair share (half the
// shards) while the dead copy's leases have long expired.
func TestIntegrationAlertsFireOnRealPrometheus(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	ports := [2]int{}
	for i := range ports {
		p, err := testenv.FreePort()
		require.NoError(t, err)
		ports[i] = p
	}
	rules := writeShortenedRules(t, dir)
	prom := testenv.NewPrometheus(t, fmt.Sprintf(`
global:
  scrape_interval: 1s
  scrape_timeout: 1s
  evaluation_interval: 1s
rule_files: [ %q ]
scrape_configs:
  - job_name: connect-kinesis
    static_configs:
      - targets: [ "127.0.0.1:%d" ]
        labels: { copy: survivor }
      - targets: [ "127.0.0.1:%d" ]
        labels: { copy: stopped }
`, rules, ports[0], ports[1]))
	k := testenv.NewKinesisMock(t)
	r := testenv.NewRedis(t)
	k.MustCreateStream(t, alertStream, alertShards)

	startAlertInstance(t, dir, "survivor", ports[0], survivorLeasePeriod, k, r)
	stopped := startAlertInstance(t, dir, "stopped", ports[1], stoppedLeasePeriod, k, r)

	// A few records to deliver; the steady writes start once both copies
	// read. Started earlier, they would pile up while a new group's copies
	// take nothing for one lease period (the survivor's is 25 s) and the
	// first copy alone cannot keep up: a backlog two copies clear only
	// slowly, which kept the falling-behind alert active past the wait
	// below on a loaded machine.
	seed := make([]types.PutRecordsRequestEntry, 40)
	for i := range seed {
		seed[i] = types.PutRecordsRequestEntry{Data: []byte(fmt.Sprintf(`{"seed":%d}`, i)), PartitionKey: aws.String(fmt.Sprintf("seed-%d", i))}
	}
	_, err := k.Client().PutRecords(t.Context(), &kinesis.PutRecordsInput{StreamName: aws.String(alertStream), Records: seed})
	require.NoError(t, err)

	// Both copies are scraped, read two shards each and deliver.
	// The messages print what the condition saw last (a pointer is
	// formatted when the wait fails).
	var owned map[string]float64
	require.Eventually(t, func() bool {
		owned = promQuery(t, prom, `kinesis_input_shards_owned{stream="`+alertStream+`"}`)
		return len(owned) == 2 && owned["survivor"] == 2 && owned["stopped"] == 2 &&
			promQuery(t, prom, `sum(kinesis_input_records_total)`)[""] > 0
	}, 90*time.Second, 500*time.Millisecond, "both copies scraped with two shards each; owned: %v", &owned)

	ctx, stopWriting := context.WithCancel(t.Context())
	var written, writeErrs atomic.Int64
	writerDone := make(chan struct{})
	go writeSteadily(ctx, k.Client(), &written, &writeErrs, writerDone)
	t.Cleanup(func() { stopWriting(); <-writerDone })
	// Two copies keep up: once the start-up (when shards are briefly
	// unowned, which may set an alert pending) is over, neither alert
	// under test is active. That must hold before the stop, or the firing
	// below would prove nothing.
	var active map[string]promAlert
	require.Eventually(t, func() bool {
		active = promAlerts(t, prom)
		_, unowned := active["KinesisShardUnowned"]
		_, behind := active["KinesisInputFallingBehind"]
		return !unowned && !behind
	}, 60*time.Second, 500*time.Millisecond, "before the stop, with both copies reading, no alert under test may be active: %v", &active)
	t.Logf("balanced 2/2, %d records written, max lag %v ms", written.Load(),
		promQuery(t, prom, `max(kinesis_input_millis_behind_latest)`)[""])

	require.NoError(t, stopped.Process.Signal(syscall.SIGKILL))
	_ = stopped.Wait()
	killed := time.Now()

	var unownedAt, behindAt, unownedClearedAt time.Duration
	var unownedAlert, behindAlert promAlert
	require.Eventually(t, func() bool {
		active = promAlerts(t, prom)
		since := time.Since(killed)
		if a, ok := active["KinesisShardUnowned"]; ok && a.State == "firing" && unownedAt == 0 {
			unownedAt, unownedAlert = since, a
		}
		if _, ok := active["KinesisShardUnowned"]; !ok && unownedAt != 0 && unownedClearedAt == 0 {
			unownedClearedAt = since
		}
		if a, ok := active["KinesisInputFallingBehind"]; ok && a.State == "firing" && behindAt == 0 {
			behindAt, behindAlert = since, a
		}
		return unownedAt != 0 && behindAt != 0
	}, 90*time.Second, 250*time.Millisecond, "alerts after the kill: %v", &active)
	t.Logf("KinesisShardUnowned firing %v after the kill (value %s shards, labels %v)", unownedAt.Round(time.Millisecond), unownedAlert.Value, unownedAlert.Labels)
	t.Logf("KinesisInputFallingBehind firing %v after the kill (value %s ms, labels %v)", behindAt.Round(time.Millisecond), behindAlert.Value, behindAlert.Labels)

	assert.Equal(t, alertStream, unownedAlert.Labels["stream"])
	unowned, err := strconv.ParseFloat(unownedAlert.Value, 64)
	require.NoError(t, err)
	assert.Equal(t, 2.0, unowned, "the stopped copy's two shards have no reader")
	assert.Equal(t, alertStream, behindAlert.Labels["stream"])
	assert.NotEmpty(t, behindAlert.Labels["shard"])
	behind, err := strconv.ParseFloat(behindAlert.Value, 64)
	require.NoError(t, err)
	assert.Greater(t, behind, float64(alertLagThresholdMillis))
	// Once the survivor counts the stopped copy as gone it takes its shards:
	// the no-owner alert ends, the survivor holds every shard.
	require.Eventually(t, func() bool {
		_, ok := promAlerts(t, prom)["KinesisShardUnowned"]
		return !ok && promQuery(t, prom, `kinesis_input_shards_owned{copy="survivor"}`)["survivor"] == alertShards
	}, 90*time.Second, 250*time.Millisecond, "the survivor takes every shard and the no-owner alert resolves")
	if unownedClearedAt == 0 {
		unownedClearedAt = time.Since(killed)
	}
	t.Logf("KinesisShardUnowned resolved %v after the kill; %d records written, %d write errors; max lag now %v ms",
		unownedClearedAt.Round(time.Millisecond), written.Load(), writeErrs.Load(),
		promQuery(t, prom, `max(kinesis_input_millis_behind_latest)`)[""])
	assert.Zero(t, writeErrs.Load(), "the writer's PutRecords calls")
}

// writeShortenedRules writes a copy of config/alerts/kinesis.rules.yaml
// whose rules under test have a short `for:` and, for falling behind, a low
// threshold. It parses the real file and changes only those values, so the
// expressions Prometheus evaluates are the real ones.
func writeShortenedRules(t *testing.T, dir string) string {
	t.Helper()
	root, err := testenv.RepoRoot()
	require.NoError(t, err)
	b, err := os.ReadFile(filepath.Join(root, "config", "alerts", "kinesis.rules.yaml"))
	require.NoError(t, err)
	var file struct {
		Groups []struct {
			Name  string           `yaml:"name"`
			Rules []map[string]any `yaml:"rules"`
		} `yaml:"groups"`
	}
	require.NoError(t, yaml.Unmarshal(b, &file))
	found := map[string]bool{}
	for _, g := range file.Groups {
		for _, rule := range g.Rules {
			switch rule["alert"] {
			case "KinesisShardUnowned":
				rule["for"] = alertFor
				found["unowned"] = true
			case "KinesisInputFallingBehind":
				expr, _ := rule["expr"].(string)
				require.Equal(t, 1, strings.Count(expr, "> 60000"), "the falling-behind threshold moved: %q", expr)
				rule["expr"] = strings.Replace(expr, "> 60000", fmt.Sprintf("> %d", alertLagThresholdMillis), 1)
				rule["for"] = alertFor
				found["behind"] = true
			}
		}
	}
	require.True(t, found["unowned"] && found["behind"], "both rules under test are in the file")
	out, err := yaml.Marshal(&file)
	require.NoError(t, err)
	path := filepath.Join(dir, "kinesis.rules.yaml")
	require.NoError(t, os.WriteFile(path, out, 0o600))
	return path
}

func startAlertInstance(t *testing.T, dir, name string, port int, leasePeriod time.Duration, k *testenv.Kinesis, r *testenv.Redis) *exec.Cmd {
	t.Helper()
	conf := filepath.Join(dir, name+".yaml")
	require.NoError(t, os.WriteFile(conf, []byte(fmt.Sprintf(alertInstanceYAML, port, alertStream,
		testenv.Region, k.Endpoint, testenv.AccessKey, testenv.SecretKey, r.URL(), alertGroup,
		name, leasePeriod, alertSleep)), 0o600))
	cmd, _ := startBinary(t, dir, name, conf, nil)
	return cmd
}

// writeSteadily puts alertWriteRate records a second, a tenth every 100ms,
// each with its own partition key so they spread over the shards.
func writeSteadily(ctx context.Context, c *kinesis.Client, written, errs *atomic.Int64, done chan<- struct{}) {
	defer close(done)
	tick := time.NewTicker(100 * time.Millisecond)
	defer tick.Stop()
	n := 0
	for {
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		}
		entries := make([]types.PutRecordsRequestEntry, alertWriteRate/10)
		for i := range entries {
			n++
			entries[i] = types.PutRecordsRequestEntry{Data: []byte(fmt.Sprintf(`{"n":%d}`, n)), PartitionKey: aws.String(fmt.Sprintf("key-%d", n))}
		}
		out, err := c.PutRecords(ctx, &kinesis.PutRecordsInput{StreamName: aws.String(alertStream), Records: entries})
		switch {
		case ctx.Err() != nil:
			return
		case err != nil || aws.ToInt32(out.FailedRecordCount) > 0:
			errs.Add(1)
		default:
			written.Add(int64(len(entries)))
		}
	}
}

// promAlert is one active alert as /api/v1/alerts lists it.
type promAlert struct {
	Labels map[string]string `json:"labels"`
	State  string            `json:"state"`
	Value  string            `json:"value"`
}

// promAlerts returns the active (pending or firing) alerts by name; for a
// name active on several series, a firing one wins. A failed request logs
// and returns none: the callers poll.
func promAlerts(t *testing.T, prom *testenv.Prometheus) map[string]promAlert {
	t.Helper()
	var body struct {
		Data struct {
			Alerts []promAlert `json:"alerts"`
		} `json:"data"`
	}
	if err := promGet(t.Context(), prom.URL+"/api/v1/alerts", &body); err != nil {
		t.Logf("listing alerts: %v", err)
	}
	out := map[string]promAlert{}
	for _, a := range body.Data.Alerts {
		name := a.Labels["alertname"]
		if prev, ok := out[name]; !ok || prev.State != "firing" {
			out[name] = a
		}
	}
	return out
}

// promQuery runs an instant query and returns each series' value by its
// `copy` label ("" for aggregates); a failed request logs and returns none.
func promQuery(t *testing.T, prom *testenv.Prometheus, q string) map[string]float64 {
	t.Helper()
	var body struct {
		Data struct {
			Result []struct {
				Metric map[string]string `json:"metric"`
				Value  [2]any            `json:"value"`
			} `json:"result"`
		} `json:"data"`
	}
	if err := promGet(t.Context(), prom.URL+"/api/v1/query?query="+url.QueryEscape(q), &body); err != nil {
		t.Logf("querying %s: %v", q, err)
	}
	out := map[string]float64{}
	for _, r := range body.Data.Result {
		var v float64
		if s, ok := r.Value[1].(string); ok {
			_, _ = fmt.Sscanf(s, "%g", &v)
		}
		out[r.Metric["copy"]] = v
	}
	return out
}
