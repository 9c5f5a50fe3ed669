package main

import (
	"context"
	"fmt"
	"math"
	"net/url"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"text/template"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/connect-kinesis/connect-kinesis/internal/testenv"
	sigsyaml "sigs.k8s.io/yaml"
)

// desiredReplicas is what the HPA (driven by KEDA or by the adapter's
// external metric) computes for an AverageValue target: ceil(metric /
// target), clamped to [min, max]. The HPA's 10% tolerance only holds the
// current count when the ratio is close to 1; left out.
func desiredReplicas(metric, target float64, minReplicas, maxReplicas int) int {
	n := int(math.Ceil(metric / target))
	return max(minReplicas, min(maxReplicas, n))
}

// promValuesAt evaluates q at ts and returns the value of each series.
func promValuesAt(t *testing.T, prom *testenv.Prometheus, q string, ts time.Time) []float64 {
	t.Helper()
	var body struct {
		Data struct {
			Result []struct {
				Value [2]any `json:"value"`
			} `json:"result"`
		} `json:"data"`
	}
	u := prom.URL + "/api/v1/query?query=" + url.QueryEscape(q) + "&time=" + strconv.FormatInt(ts.Unix(), 10)
	if err := promGet(t.Context(), u, &body); err != nil {
		t.Logf("querying %s: %v", q, err)
		return nil
	}
	var out []float64
	for _, r := range body.Data.Result {
		var v float64
		if s, ok := r.Value[1].(string); ok {
			_, _ = fmt.Sscanf(s, "%g", &v)
		}
		out = append(out, v)
	}
	return out
}

// promValueAt is promValuesAt for a query of one series (KEDA refuses a
// query with several; the adapter's HPA would sum them): its value and the
// number of series.
func promValueAt(t *testing.T, prom *testenv.Prometheus, q string, ts time.Time) (float64, int) {
	t.Helper()
	vs := promValuesAt(t, prom, q, ts)
	if len(vs) == 0 {
		return 0, 0
	}
	return vs[0], len(vs)
}

// adapterQuery renders the adapter rule's metricsQuery as prometheus-adapter
// does (a Go template with << >> delimiters) for an HPA selecting matchers.
func adapterQuery(t *testing.T, matchers string) string {
	t.Helper()
	raw, err := os.ReadFile(filepath.Join(deployDir, "prometheus-adapter.yaml"))
	require.NoError(t, err)
	var conf adapterConfig
	require.NoError(t, sigsyaml.UnmarshalStrict(raw, &conf))
	tmpl, err := template.New("q").Delims("<<", ">>").Parse(conf.ExternalRules[0].MetricsQuery)
	require.NoError(t, err)
	var b strings.Builder
	require.NoError(t, tmpl.Execute(&b, map[string]string{"Series": "kinesis_input_millis_behind_latest", "LabelMatchers": matchers, "GroupBy": "stream,label"}))
	return b.String()
}

// TestIntegrationAutoscalingQueriesOnRealPrometheus runs the scaling queries
// of autoscaling-keda.yaml and prometheus-adapter.yaml on a real Prometheus
// scraping a real copy of the binary, with the test's stream and a target
// lag of scaleTarget instead of a minute. Caught up, both ask for
// minReplicaCount; then the copy (at most 20 records/s, alertSleep a
// message) falls behind a writer putting 30 a second, and once its summed
// lag passes more than maxReplicaCount targets both ask for exactly
// maxReplicaCount: the shard count, not more.
func TestIntegrationAutoscalingQueriesOnRealPrometheus(t *testing.T) {
	t.Parallel()
	const scaleTarget = 2000.0 // ms of lag per copy
	so := scaledObject(t)
	minR, maxR := int(dig(so, "spec", "minReplicaCount").(float64)), int(dig(so, "spec", "maxReplicaCount").(float64))
	require.Equal(t, alertShards, maxR, "the test's stream has as many shards as the manifest's cap")
	// The test's copy reads stream `alerts` with no input label.
	keda := strings.NewReplacer(`stream="orders"`, `stream="`+alertStream+`"`, `label="orders_to_stdout"`, `label=""`).
		Replace(dig(so, "spec", "triggers", 0, "metadata", "query").(string))
	require.NotEqual(t, dig(so, "spec", "triggers", 0, "metadata", "query"), keda, "the test's selectors replaced the manifest's")
	adapter := adapterQuery(t, `stream="`+alertStream+`",label=""`)

	dir := t.TempDir()
	port, err := testenv.FreePort()
	require.NoError(t, err)
	prom := testenv.NewPrometheus(t, fmt.Sprintf(`
global: { scrape_interval: 1s, scrape_timeout: 1s, evaluation_interval: 1s }
scrape_configs:
  - job_name: connect-kinesis
    static_configs: [ { targets: [ "127.0.0.1:%d" ] } ]
`, port))
	k := testenv.NewKinesisMock(t)
	r := testenv.NewRedis(t)
	k.MustCreateStream(t, alertStream, alertShards)
	startAlertInstance(t, dir, "only", port, 10*time.Second, k, r)

	both := func(ts time.Time) (kv, av float64, series int) {
		kv, n := promValueAt(t, prom, keda, ts)
		av, m := promValueAt(t, prom, adapter, ts)
		return kv, av, max(n, m)
	}
	var kv, av float64
	var series int
	require.Eventually(t, func() bool {
		owned := promQuery(t, prom, `kinesis_input_shards_owned{stream="`+alertStream+`"}`)
		kv, av, series = both(time.Now().Add(-time.Second))
		return owned[""] == alertShards && series == 1
	}, 90*time.Second, 500*time.Millisecond, "the copy reads all %d shards and reports their lag", alertShards)
	assert.Equal(t, minR, desiredReplicas(kv, scaleTarget, minR, maxR), "caught up (lag %v ms): minReplicaCount", kv)
	assert.Equal(t, kv, av, "KEDA's query and the adapter's metric agree")

	ctx, stopWriting := context.WithCancel(t.Context())
	var written, writeErrs atomic.Int64
	writerDone := make(chan struct{})
	go writeSteadily(ctx, k.Client(), &written, &writeErrs, writerDone)
	t.Cleanup(func() { stopWriting(); <-writerDone })

	// Wait until the lag asks for more copies than shards, then check both
	// queries at one instant: one series each, equal, and the count capped.
	var at time.Time
	require.Eventually(t, func() bool {
		at = time.Now().Add(-time.Second)
		kv, av, series = both(at)
		return kv > float64(maxR+1)*scaleTarget
	}, 120*time.Second, time.Second, "the copy falls behind; lag %v ms", &kv)
	assert.Equal(t, 1, series, "one number for KEDA")
	assert.Equal(t, kv, av)
	perShard := promValuesAt(t, prom, fmt.Sprintf(`kinesis_input_millis_behind_latest{stream=%q}`, alertStream), at)
	assert.Len(t, perShard, alertShards, "one series per shard")
	var sum float64
	for _, v := range perShard {
		sum += v
	}
	assert.InDelta(t, sum, kv, 0.5, "the query sums the shards' lag: %v", perShard)
	assert.Greater(t, int(math.Ceil(kv/scaleTarget)), maxR, "uncapped, more copies than shards")
	assert.Equal(t, maxR, desiredReplicas(kv, scaleTarget, minR, maxR), "lagging (%v ms over %d shards): the shard count", kv, alertShards)
	t.Logf("caught up: %d replica(s); lagging %.0f ms: ceil(%.0f/%.0f)=%d, capped at %d; %d records written",
		minR, kv, kv, scaleTarget, int(math.Ceil(kv/scaleTarget)), maxR, written.Load())
}
