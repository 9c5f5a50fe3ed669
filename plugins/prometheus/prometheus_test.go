package prometheus

import (
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	_ "github.com/redpanda-data/benthos/v4/public/components/pure"
	"github.com/redpanda-data/benthos/v4/public/service"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// runPipeline runs a small pipeline with the given metrics config and returns
// what /metrics served after it finished.
func runPipeline(t *testing.T, metricsYAML string) string {
	t.Helper()
	return runPipelineIn(t, service.GlobalEnvironment(), metricsYAML)
}

func runPipelineIn(t *testing.T, env *service.Environment, metricsYAML string) string {
	t.Helper()
	mux := http.NewServeMux()
	b := env.NewStreamBuilder()
	b.SetHTTPMux(mux)
	require.NoError(t, b.SetYAML(`
input:
  label: gen
  generate:
    count: 25
    interval: ""
    mapping: 'root = {"n": counter()}'
pipeline:
  # One processing thread, so the gauge's last value is the last message's.
  threads: 1
  processors:
    - mapping: 'root = this'
    - metric:
        type: gauge
        name: last_n
        labels:
          source: gen
        value: '${! json("n") }'
output:
  label: sink
  drop: {}
`+metricsYAML))
	stream, err := b.Build()
	require.NoError(t, err)
	require.NoError(t, stream.Run(t.Context()))

	srv := httptest.NewServer(mux)
	defer srv.Close()
	resp, err := http.Get(srv.URL + "/metrics")
	require.NoError(t, err)
	defer resp.Body.Close()
	require.Equal(t, http.StatusOK, resp.StatusCode)
	body, err := io.ReadAll(resp.Body)
	require.NoError(t, err)
	return string(body)
}

func TestExporterServesCountersTimersGaugesWithLabels(t *testing.T) {
	text := runPipeline(t, `
metrics:
  kinesis_prometheus:
    add_go_metrics: false
`)
	// Counter with its labels and the exact count of generated messages.
	assert.Contains(t, text, `input_received{label="gen",path="root.input"} 25`)
	assert.Contains(t, text, `output_sent{label="sink",path="root.output"} 25`)
	// Timers are summaries in seconds.
	assert.Contains(t, text, "# TYPE output_latency_seconds summary")
	assert.Contains(t, text, `output_latency_seconds_count{label="sink",path="root.output"} `)
	assert.Contains(t, text, `output_latency_seconds{label="sink",path="root.output",quantile="0.99"}`)
	// A gauge with a label, at the last value set.
	assert.Contains(t, text, "# TYPE last_n gauge")
	assert.Contains(t, text, `last_n{label="",path="root.pipeline.processors.1",source="gen"} 25`)
	// Process metrics on, Go metrics off.
	assert.Contains(t, text, "process_cpu_seconds_total")
	assert.NotContains(t, text, "go_goroutines")
}

func TestExporterHistogramsAndPrefix(t *testing.T) {
	text := runPipeline(t, `
metrics:
  kinesis_prometheus:
    prefix: app
    use_histogram_timing: true
    histogram_buckets: [0.001, 0.01, 1]
`)
	assert.Contains(t, text, "# TYPE app_output_latency_seconds histogram")
	assert.Contains(t, text, `app_output_latency_seconds_bucket{label="sink",path="root.output",le="0.01"}`)
	assert.Contains(t, text, `app_input_received{label="gen",path="root.input"} 25`)
	assert.Contains(t, text, "go_goroutines")
}

func TestExporterRejectsBadConfig(t *testing.T) {
	for name, tc := range map[string]struct{ yaml, want string }{
		"buckets not increasing": {`histogram_buckets: [1, 0.5]`, "histogram_buckets"},
		"prefix not a name":      {`prefix: "my-app"`, "prefix"},
	} {
		t.Run(name, func(t *testing.T) {
			conf, err := spec().ParseYAML(tc.yaml, nil)
			require.NoError(t, err)
			_, err = newExporterFromParsed(conf, nil)
			require.Error(t, err)
			assert.Contains(t, err.Error(), tc.want)
		})
	}
}

func TestSanitize(t *testing.T) {
	for in, want := range map[string]string{
		"input_received":   "input_received",
		"kinesis.shard-id": "kinesis_shard_id",
		"9lives":           "_9lives",
	} {
		assert.Equal(t, want, sanitize(in), in)
	}
}

func TestTimerRecordsSeconds(t *testing.T) {
	conf, err := spec().ParseYAML(`add_go_metrics: false
add_process_metrics: false`, nil)
	require.NoError(t, err)
	e, err := newExporterFromParsed(conf, nil)
	require.NoError(t, err)
	e.NewTimerCtor("put_latency_ns", "stream")("s1").Timing(int64(1500 * time.Millisecond))
	rec := httptest.NewRecorder()
	e.HandlerFunc()(rec, httptest.NewRequest(http.MethodGet, "/metrics", nil))
	body := rec.Body.String()
	assert.True(t, strings.Contains(body, `put_latency_seconds_sum{stream="s1"} 1.5`), body)
}

// HELP lines describe this project's metrics; Benthos' own get a generic one.
func TestHelpDescribesKinesisMetrics(t *testing.T) {
	conf, err := spec().ParseYAML(`{add_go_metrics: false, add_process_metrics: false}`, nil)
	require.NoError(t, err)
	e, err := newExporterFromParsed(conf, nil)
	require.NoError(t, err)
	e.NewCounterCtor("kinesis_output_records_total", "stream")("s1").Incr(1)
	e.NewTimerCtor("kinesis_output_put_latency_ns", "stream")("s1").Timing(1)
	e.NewCounterCtor("input_received")().Incr(1)
	rec := httptest.NewRecorder()
	e.HandlerFunc()(rec, httptest.NewRequest(http.MethodGet, "/metrics", nil))
	body := rec.Body.String()
	assert.Contains(t, body, "# HELP kinesis_output_records_total Records Kinesis accepted.")
	assert.Contains(t, body, "# HELP kinesis_output_put_latency_seconds Duration of each PutRecords call")
	assert.Contains(t, body, "# HELP input_received Benthos counter input_received")
}

// The exporter's own name never replaces another plugin's; `prometheus` is
// claimed only when free, so Redpanda Connect's exporter of that name stays.
func TestRegisterAsPrometheusKeepsAnExistingExporter(t *testing.T) {
	t.Run("free name", func(t *testing.T) {
		env := service.NewEmptyEnvironment()
		registered, err := RegisterAsPrometheus(env)
		require.NoError(t, err)
		assert.True(t, registered)
		assert.True(t, lintsAs(env, PrometheusName, fieldPrefix), "prometheus is this exporter")
	})
	t.Run("taken by another exporter", func(t *testing.T) {
		env := service.GlobalEnvironment().Clone()
		other := service.NewConfigSpec().Summary("Another prometheus exporter.").Field(service.NewStringField("x").Default(""))
		require.NoError(t, env.RegisterMetricsExporter(PrometheusName, other,
			func(*service.ParsedConfig, *service.Logger) (service.MetricsExporter, error) {
				return nil, errors.New("not used")
			}))
		registered, err := RegisterAsPrometheus(env)
		require.NoError(t, err)
		assert.False(t, registered)
		assert.True(t, lintsAs(env, PrometheusName, "x"), "prometheus is still the other exporter")
		assert.False(t, lintsAs(env, PrometheusName, fieldPrefix))
		// Both live in one binary: kinesis_prometheus still serves scrapes.
		text := runPipelineIn(t, env, "metrics:\n  kinesis_prometheus: {}\n")
		assert.Contains(t, text, `input_received{label="gen",path="root.input"} 25`)
	})
}

// lintsAs lints `name: {<field>: ""}` in env: an unknown field means the
// exporter registered under name is not the one with that field.
func lintsAs(env *service.Environment, name, field string) bool {
	lints, err := env.NewComponentConfigLinter().LintMetricsYAML([]byte(name + ": {" + field + ": \"\"}"))
	return err == nil && len(lints) == 0
}
