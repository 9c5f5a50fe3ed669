package main

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/kinesis"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/connect-kinesis/connect-kinesis/internal/faultproxy"
	"github.com/connect-kinesis/connect-kinesis/internal/kpl"
	"github.com/connect-kinesis/connect-kinesis/internal/testenv"
)

// The dashboard test's pipelines. The writer's every 100th message has an
// empty partition key, which the output refuses for good (and the fallback
// drops), so the failed-messages panel has data. The other keys are five,
// so each batch of ten holds every key twice: an ordered write sends each
// key once per request, and the key-wait panel has data. Two writers run: one
// exports timers as summaries (the exporter's default), one as histograms,
// so a query written for both is tried with both. Every 100th message from
// the 26th is poison: the readers' outputs reject it, and their inputs give
// it up after two attempts to a dead letter that fails half its writes, so
// the poison-record panels have data.
const (
	dashboardGroup = "dashboard"

	dashboardWriterYAML = `
logger: { level: warn, format: logfmt }
http: { address: 127.0.0.1:%d }
metrics: { prometheus: { use_histogram_timing: %t } }
input:
  generate:
    interval: %s
    mapping: |
      let n = counter()
      root.n = $n
      root.key = if $n %% 100 == 0 { "" } else if $n %% 100 == 50 { deleted() } else { "key-" + ($n %% 5).string() }
      root.poison = if $n %% 100 == 25 { true } else { deleted() }
output:
  fallback:
    - kinesis:
        stream: %s
        partition_key: '${! json("key") }'
        region: %s
        endpoint: %s
        credentials: { id: %s, secret: %s }
        backoff: { initial_interval: 10ms, max_interval: 100ms, max_elapsed_time: 10s }
        batching: { count: 10, period: 100ms }
    - drop: {}
shutdown_timeout: 5s
`
	dashboardReaderYAML = `
logger: { level: warn, format: logfmt }
http: { address: 127.0.0.1:%d }
metrics: { prometheus: { use_histogram_timing: %t } }
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
      commit_period: 200ms
    lease: { period: 3s, rebalance_period: 1s, handoff_timeout: 2s }
    shard_discovery_interval: 1s
    poll_interval: 200ms
    idle_poll_interval: 200ms
    redelivery: { max_attempts: 2, dead_letter: dead_letter }
output:
  switch:
    cases:
      - check: this.poison == true
        output: { reject: "poison" }
      - output: { drop: {} }
output_resources:
  - label: dead_letter
    switch:
      cases:
        - check: 'random_int(min: 0, max: 1) == 0'
          output: { reject: "the dead letter is down" }
        - output: { drop: {} }
shutdown_timeout: 5s
`
)

// TestIntegrationDashboardPanelsHaveData runs two writers (generate →
// kinesis output; timers as summaries in one, histograms in the other) and
// a reader (kinesis input → drop) against kinesis-mock through
// the fault proxy, scraped by a real Prometheus every second, and sends
// every query of config/dashboards/kinesis.json (variables at "All") to it
// until each returns at least one series. The faults make the error panels
// honest: the proxy refuses PutRecords entries (retries by code), throttles
// GetRecords and expires iterators; a stray KPL aggregate is dropped by the
// reader; a `checkpoints reset --force` fences the reader out of its leases
// (leases lost, commits refused). A query that names a metric or label
// the binary does not export, or does not parse, fails the test with the
// panel's title and the query.
func TestIntegrationDashboardPanelsHaveData(t *testing.T) {
	t.Parallel()
	d := loadDashboard(t)
	queries := d.queries()
	require.NotEmpty(t, queries)

	k := testenv.SharedKinesisMock(t)
	r := testenv.NewRedis(t)
	stream := testenv.StreamName(t)
	arn := k.MustCreateStream(t, stream, 2)
	front, err := faultproxy.StartFront(k.Endpoint, "127.0.0.1:0", 1)
	require.NoError(t, err)
	t.Cleanup(func() { _ = front.Close() })
	front.Set("PutRecords", faultproxy.Rule{EntryFailRate: 0.1})
	front.Set("GetRecords", faultproxy.Rule{ThrottleRate: 0.05})
	front.SetReadFaults(faultproxy.ReadFaults{ExpiredIteratorRate: 0.02})
	putStrayAggregate(t, k.Client(), stream)

	dir := t.TempDir()
	var ports [4]int
	for i := range ports {
		ports[i], err = testenv.FreePort()
		require.NoError(t, err)
	}
	prom := testenv.NewPrometheus(t, fmt.Sprintf(`
global: { scrape_interval: 1s, scrape_timeout: 1s }
scrape_configs:
  - job_name: connect-kinesis
    static_configs:
      - targets: [ "127.0.0.1:%d", "127.0.0.1:%d", "127.0.0.1:%d", "127.0.0.1:%d" ]
`, ports[0], ports[1], ports[2], ports[3]))
	endpoint := []any{testenv.Region, front.URL, testenv.AccessKey, testenv.SecretKey}
	startDashboardPipeline(t, dir, "writer", fmt.Sprintf(dashboardWriterYAML, append([]any{ports[0], false, "20ms", stream}, endpoint...)...))
	startDashboardPipeline(t, dir, "writer-histograms", fmt.Sprintf(dashboardWriterYAML, append([]any{ports[2], true, "100ms", stream}, endpoint...)...))
	startDashboardPipeline(t, dir, "reader", fmt.Sprintf(dashboardReaderYAML, append(append([]any{ports[1], false, stream}, endpoint...), r.URL(), dashboardGroup)...))
	// A second group reads the stream on its own, its timers (checkpoint
	// commit latency) as histograms, for the other side of the latency
	// panels' `or`.
	startDashboardPipeline(t, dir, "reader-histograms", fmt.Sprintf(dashboardReaderYAML, append(append([]any{ports[3], true, stream}, endpoint...), r.URL(), dashboardGroup+"-histograms")...))

	// Poll until every query has a series. Meanwhile, once the reader
	// commits, an operator's forced reset fences it: its next commit or
	// renewal is refused, which is how leases are lost and commits fail in
	// production. Reset again if one reset left either counter unseen. The
	// reset waits for the stray aggregate to be dropped: it moves the
	// group to the tip, past the aggregate.
	started := time.Now()
	deadline := started.Add(150 * time.Second)
	var lastReset time.Time
	resets := 0
	var empty []string
	for {
		empty = emptyDashboardQueries(t.Context(), t, prom, d, queries)
		if len(empty) == 0 || time.Now().After(deadline) {
			break
		}
		if time.Since(lastReset) > 5*time.Second && promHas(t.Context(), prom, "kinesis_checkpoint_commits_total") &&
			promHas(t.Context(), prom, "kinesis_input_records_dropped_total") &&
			!(promHas(t.Context(), prom, "kinesis_checkpoint_errors_total") && promHas(t.Context(), prom, "kinesis_input_leases_lost_total")) {
			lastReset = time.Now()
			resetGroup(t, r, stream, arn)
			resets++
		}
		select {
		case <-t.Context().Done():
			return
		case <-time.After(time.Second):
		}
	}
	for _, e := range empty {
		t.Error(e)
	}
	if len(empty) == 0 {
		t.Logf("all %d queries of %d panels returned series after %v", len(queries), countPanels(d), time.Since(started).Round(time.Second))
	}
	t.Logf("fault proxy: PutRecords %+v, GetRecords %+v", front.Stats("PutRecords"), front.Stats("GetRecords"))
	totals := map[string]float64{}
	for _, m := range []string{"kinesis_output_retries_total", "kinesis_output_failed_total", "kinesis_input_throttled_total",
		"kinesis_input_iterator_expired_total", "kinesis_input_records_dropped_total", "kinesis_input_leases_lost_total",
		"kinesis_checkpoint_errors_total", "kinesis_input_redelivered_total", "kinesis_input_dead_lettered_total", "kinesis_input_dead_letter_errors_total"} {
		totals[m] = promQuery(t, prom, "sum("+m+")")[""]
	}
	t.Logf("after %d forced resets, the error counters: %v", resets, totals)

	// The labels operators break these down by: the writer's empty keys
	// fail as invalid, the checkpoint metrics name the stream, the
	// poison records are given up for their attempts, per shard.
	for _, q := range []string{
		fmt.Sprintf(`kinesis_input_dead_lettered_total{stream=%q, shard=~"shardId-.+", reason="max_attempts"}`, stream),
		fmt.Sprintf(`kinesis_input_dead_letter_errors_total{stream=%q, shard=~"shardId-.+"}`, stream),
		fmt.Sprintf(`kinesis_output_failed_total{stream=%q, reason="invalid"}`, stream),
		fmt.Sprintf(`kinesis_checkpoint_commits_total{stream=%q}`, stream),
		fmt.Sprintf(`kinesis_checkpoint_errors_total{stream=%q}`, stream),
		fmt.Sprintf(`kinesis_checkpoint_commit_latency_seconds_count{stream=%q}`, stream),
		fmt.Sprintf(`kinesis_checkpoint_commit_latency_seconds_bucket{stream=%q}`, stream),
	} {
		assert.True(t, promHas(t.Context(), prom, q), "a series %s", q)
	}

	// The variables offer values: the stream under test among them.
	for _, v := range d.Templating.List {
		if v.Type != "query" {
			continue
		}
		m := variableQuery.FindStringSubmatch(v.Definition)
		require.NotNil(t, m, "variable %s", v.Name)
		match, err := substituteVariables(m[1], d.variableNames())
		require.NoError(t, err)
		values, err := promLabelValues(t.Context(), prom, match, m[2])
		if assert.NoError(t, err, "variable %s: %s", v.Name, v.Definition) {
			assert.NotEmpty(t, values, "variable %s: %s lists no value", v.Name, v.Definition)
		}
		if v.Name == "stream" {
			assert.Contains(t, values, stream)
		}
	}
}

// emptyDashboardQueries sends each query, its variables substituted, to
// Prometheus and describes those that returned no series or an error. A
// query `a or b` (one written for two exports of a metric) is also sent
// as a and as b: each must find its series.
func emptyDashboardQueries(ctx context.Context, t *testing.T, prom *testenv.Prometheus, d grafanaDashboard, queries []dashboardQuery) []string {
	t.Helper()
	var out []string
	for _, q := range queries {
		expr, err := substituteVariables(q.Expr, d.variableNames())
		require.NoError(t, err, "%s", q)
		parts := splitTopLevelOr(expr)
		if len(parts) > 1 {
			parts = append([]string{expr}, parts...)
		}
		for _, e := range parts {
			n, err := promSeriesCount(ctx, prom, e)
			switch {
			case err != nil:
				out = append(out, fmt.Sprintf("%s: %v\n\t%s", q, err, e))
			case n == 0:
				out = append(out, fmt.Sprintf("%s returned no series from the running pipelines:\n\t%s", q, e))
			}
		}
	}
	return out
}

// splitTopLevelOr splits a PromQL expression at each `or` outside
// parentheses, braces, brackets and quotes.
func splitTopLevelOr(expr string) []string {
	var parts []string
	depth, start := 0, 0
	var quote byte
	for i := 0; i < len(expr); i++ {
		c := expr[i]
		switch {
		case quote != 0:
			if c == '\\' {
				i++
			} else if c == quote {
				quote = 0
			}
		case c == '"' || c == '\'':
			quote = c
		case strings.IndexByte("({[", c) >= 0:
			depth++
		case strings.IndexByte(")}]", c) >= 0:
			depth--
		case depth == 0 && strings.HasPrefix(expr[i:], " or "):
			parts = append(parts, strings.TrimSpace(expr[start:i]))
			start = i + len(" or ")
			i = start - 1
		}
	}
	return append(parts, strings.TrimSpace(expr[start:]))
}

// promHas reports whether Prometheus holds a series of the metric.
func promHas(ctx context.Context, prom *testenv.Prometheus, metric string) bool {
	n, err := promSeriesCount(ctx, prom, metric)
	return err == nil && n > 0
}

func countPanels(d grafanaDashboard) int {
	n := 0
	d.walk(func(string, grafanaPanel) { n++ })
	return n
}

func startDashboardPipeline(t *testing.T, dir, name, conf string) {
	t.Helper()
	path := filepath.Join(dir, name+".yaml")
	require.NoError(t, os.WriteFile(path, []byte(conf), 0o600))
	startBinary(t, dir, name, path, nil)
}

// resetGroup runs `checkpoints reset --to latest --force --yes` on the group.
func resetGroup(t *testing.T, r *testenv.Redis, stream, arn string) {
	t.Helper()
	out, err := exec.CommandContext(t.Context(), binary, "checkpoints", "reset", "--redis-url", r.URL(),
		"--group", dashboardGroup, "--stream", stream, "--stream-id", arn, "--to", "latest", "--force", "--yes").CombinedOutput()
	require.NoError(t, err, "checkpoints reset: %s", out)
}

// putStrayAggregate writes a KPL aggregate to the first of two shards whose
// one user record's hash key lies in the second: the stray copy a producer
// leaves behind when it learns of a split late. The reader drops it.
func putStrayAggregate(t *testing.T, c *kinesis.Client, stream string) {
	t.Helper()
	const lastHashKey = "340282366920938463463374607431768211455" // 2^128-1, in the second shard
	data := kpl.Encode([]kpl.Record{{PartitionKey: "stray", ExplicitHashKey: lastHashKey, Data: []byte(`{"stray":true}`)}})
	out, err := c.PutRecord(t.Context(), &kinesis.PutRecordInput{
		StreamName: aws.String(stream), PartitionKey: aws.String("stray"), ExplicitHashKey: aws.String("0"), Data: data,
	})
	require.NoError(t, err)
	require.True(t, strings.HasSuffix(aws.ToString(out.ShardId), "0"), "the aggregate landed on the first shard, %s", aws.ToString(out.ShardId))
}
