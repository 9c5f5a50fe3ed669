package prometheus

import (
	"bytes"
	"io"
	"log/slog"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/redpanda-data/benthos/v4/public/service"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestExporterRefusesAMetricNameWithOtherLabels guards issue 38 item 7: a
// second metric of the same name but other labels used to get the first
// one's collector, so its values were recorded under the first one's label
// names (same count), or silently dropped (another count), with nothing
// logged. Now it is not exported, and a WARN says so once.
func TestExporterRefusesAMetricNameWithOtherLabels(t *testing.T) {
	var logs bytes.Buffer
	log := service.NewLoggerFromSlog(slog.New(slog.NewTextHandler(&logs, &slog.HandlerOptions{Level: slog.LevelDebug})))
	conf, err := spec().ParseYAML(`add_go_metrics: false
add_process_metrics: false`, nil)
	require.NoError(t, err)
	e, err := newExporterFromParsed(conf, log)
	require.NoError(t, err)

	e.NewCounterCtor("hits", "region")("eu").Incr(1)
	// The same name, the same number of labels, other label names.
	for range 3 {
		e.NewCounterCtor("hits", "tenant")("acme").Incr(5)
	}
	// The same name, another number of labels.
	e.NewGaugeCtor("depth", "queue")("q1").Set(7)
	e.NewGaugeCtor("depth", "queue", "shard")("q1", "s1").Set(9)
	// The same name and labels share one collector.
	e.NewCounterCtor("hits", "region")("eu").Incr(1)

	rec := httptest.NewRecorder()
	e.HandlerFunc()(rec, httptest.NewRequest("GET", "/metrics", nil))
	body, err := io.ReadAll(rec.Body)
	require.NoError(t, err)
	text := string(body)
	t.Logf("metrics:\n%s\nlogs:\n%s", text, logs.String())

	assert.Contains(t, text, `hits{region="eu"} 2`)
	assert.NotContains(t, text, `region="acme"`, "a value recorded under another metric's label names")
	assert.Contains(t, text, `depth{queue="q1"} 7`)
	warns := logs.String()
	assert.Equal(t, 1, strings.Count(warns, `metric=hits`), "one WARN for hits, however often it is asked for")
	assert.Contains(t, warns, "level=WARN")
	for _, want := range [][]string{
		{"metric=hits", "labels=tenant", "registered_labels=region"},
		{"metric=depth", "labels=queue,shard", "registered_labels=queue"},
	} {
		line := lineWith(warns, want[0])
		for _, w := range want {
			assert.Contains(t, line, w)
		}
		assert.Contains(t, line, "Metric not exported")
	}
}

// lineWith returns the first line of text that holds s.
func lineWith(text, s string) string {
	for _, line := range strings.Split(text, "\n") {
		if strings.Contains(line, s) {
			return line
		}
	}
	return ""
}
