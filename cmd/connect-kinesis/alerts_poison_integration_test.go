package main

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
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

// blockedInstanceYAML reads with the default redelivery policy (a failing
// record is delivered again forever) and rejects every poison message; the
// others' shard ids go to a file.
const blockedInstanceYAML = `
logger: { level: info, format: logfmt }
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
      group: blocked
      commit_period: 500ms
    lease: { period: 3s, rebalance_period: 1s }
    shard_discovery_interval: 1s
    poll_interval: 200ms
    idle_poll_interval: 200ms
output:
  switch:
    cases:
      - check: this.poison == true
        output: { reject: "poison" }
      - output:
          file: { path: %s, codec: lines }
          processors: [ { mapping: 'root = @kinesis_shard' } ]
shutdown_timeout: 5s
`

// blockedThresholdSeconds is the test's copy's threshold of
// KinesisShardBlockedOnRedelivery (the real one is 900 s).
const blockedThresholdSeconds = 3

// TestIntegrationAlertShardBlockedOnRedeliveryFires: one poison record (the
// output rejects it every time) on one shard of a two-shard stream, read
// with the default policy, which retries it forever. A real Prometheus
// scrapes the binary and evaluates KinesisShardBlockedOnRedelivery from
// config/alerts/kinesis.rules.yaml, its expression as shipped but for a
// threshold of 3 s and a `for:` of 3 s: it fires for the poisoned shard,
// not for the other, whose records are still delivered. Seen failing with
// the rule's `max by (stream, shard)` made `max by (stream)` (no shard
// label on the alert).
func TestIntegrationAlertShardBlockedOnRedeliveryFires(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	port, err := testenv.FreePort()
	require.NoError(t, err)
	prom := testenv.NewPrometheus(t, fmt.Sprintf(`
global: { scrape_interval: 1s, scrape_timeout: 1s, evaluation_interval: 1s }
rule_files: [ %q ]
scrape_configs:
  - job_name: connect-kinesis
    static_configs:
      - targets: [ "127.0.0.1:%d" ]
`, writeBlockedRule(t, dir), port))
	k := testenv.SharedKinesisMock(t)
	r := testenv.NewRedis(t)
	stream := testenv.StreamName(t)
	k.MustCreateStream(t, stream, 2)

	put := func(data, key string) string {
		out, err := k.Client().PutRecords(t.Context(), &kinesis.PutRecordsInput{StreamName: aws.String(stream),
			Records: []types.PutRecordsRequestEntry{{Data: []byte(data), PartitionKey: aws.String(key)}}})
		require.NoError(t, err)
		require.Zero(t, aws.ToInt32(out.FailedRecordCount))
		return aws.ToString(out.Records[0].ShardId)
	}
	poisoned := put(`{"poison":true}`, "poison")
	conf := filepath.Join(dir, "reader.yaml")
	require.NoError(t, os.WriteFile(conf, []byte(fmt.Sprintf(blockedInstanceYAML, port, stream, testenv.Region, k.Endpoint,
		testenv.AccessKey, testenv.SecretKey, r.URL(), filepath.Join(dir, "delivered.txt"))), 0o600))
	startBinary(t, dir, "reader", conf, nil)

	// Records of the other shard keep being delivered while the alert
	// fires for the poisoned one.
	var fired promAlert
	var good, delivered, behind int
	n := 0
	require.Eventually(t, func() bool {
		for range 10 {
			n++
			if shard := put(fmt.Sprintf(`{"n":%d}`, n), fmt.Sprintf("good-%d", n)); shard != poisoned {
				good++
			}
		}
		delivered, behind = 0, 0
		for _, l := range readLines(t, filepath.Join(dir, "delivered.txt")) {
			if l == poisoned {
				behind++
			} else {
				delivered++
			}
		}
		a, ok := promAlerts(t, prom)["KinesisShardBlockedOnRedelivery"]
		fired = a
		return ok && a.State == "firing" && delivered >= good-10
	}, 90*time.Second, time.Second, "the alert fires for the blocked shard while the other is read (last seen: %+v, %v of %v delivered)", &fired, &delivered, &good)
	t.Logf("KinesisShardBlockedOnRedelivery firing: labels %v, value %s s; the other shard: %d of %d records delivered",
		fired.Labels, fired.Value, delivered, good)
	// The good records written before the reader's first read share the
	// poison record's batch: the switch output rejects only the poison
	// message, so the others are written and done, and only the poison
	// record is retried (docs/poison-records.md, "Per-key order when the
	// output names failures"; 26 to 31 seen). Later batches of the shard
	// wait behind it. Logged, not asserted: the alert is under test.
	t.Logf("records behind the poison record on its shard delivered while it was retried: %d", behind)
	assert.Equal(t, stream, fired.Labels["stream"])
	assert.Equal(t, poisoned, fired.Labels["shard"], "the alert names the shard the poison record blocks")
	assert.Equal(t, "critical", fired.Labels["severity"])
	blocked := promQuery(t, prom, fmt.Sprintf(`count(max by (stream, shard) (kinesis_input_redelivery_oldest_seconds{stream=%q}) > %d)`, stream, blockedThresholdSeconds))
	assert.Equal(t, 1.0, blocked[""], "only the poisoned shard waits past the threshold")
}

// writeBlockedRule writes config/alerts/kinesis.rules.yaml's
// KinesisShardBlockedOnRedelivery alone, its threshold and `for:` short.
func writeBlockedRule(t *testing.T, dir string) string {
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
	var kept []map[string]any
	for _, g := range file.Groups {
		for _, rule := range g.Rules {
			if rule["alert"] != "KinesisShardBlockedOnRedelivery" {
				continue
			}
			expr, _ := rule["expr"].(string)
			require.Equal(t, 1, strings.Count(expr, "> 900"), "the blocked-shard threshold moved: %q", expr)
			rule["expr"] = strings.Replace(expr, "> 900", fmt.Sprintf("> %d", blockedThresholdSeconds), 1)
			rule["for"] = alertFor
			kept = append(kept, rule)
		}
	}
	require.Len(t, kept, 1, "the rule is in the file")
	file.Groups = file.Groups[:1]
	file.Groups[0].Rules = kept
	out, err := yaml.Marshal(&file)
	require.NoError(t, err)
	path := filepath.Join(dir, "blocked.rules.yaml")
	require.NoError(t, os.WriteFile(path, out, 0o600))
	return path
}
