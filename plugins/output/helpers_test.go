package output

import (
	"context"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redpanda-data/benthos/v4/public/service"
)

func contextWithTimeout(t *testing.T, d time.Duration) (context.Context, context.CancelFunc) {
	return context.WithTimeout(t.Context(), d)
}

// captured holds the metrics of the last pipeline run with the
// `test_capture` metrics exporter, keyed "name" or "name{v1,v2}".
type captured struct {
	mu       sync.Mutex
	counters map[string]int64
	timings  map[string]int
}

// Counter sums a counter over every label set that includes labels.
func (c *captured) Counter(name string, labels ...string) int64 {
	c.mu.Lock()
	defer c.mu.Unlock()
	var n int64
	for k, v := range c.counters {
		if matchKey(k, name, labels) {
			n += v
		}
	}
	return n
}

// Timings counts the observations of a timer.
func (c *captured) Timings(name string) int {
	c.mu.Lock()
	defer c.mu.Unlock()
	n := 0
	for k, v := range c.timings {
		if matchKey(k, name, nil) {
			n += v
		}
	}
	return n
}

// matchKey reports whether key is the metric name with every one of labels
// among its label values (Benthos adds the component's label and path).
func matchKey(key, name string, labels []string) bool {
	if key == name {
		return len(labels) == 0
	}
	values, ok := strings.CutPrefix(key, name+"{")
	if !ok {
		return false
	}
	have := strings.Split(strings.TrimSuffix(values, "}"), ",")
	for _, l := range labels {
		if !slices.Contains(have, l) {
			return false
		}
	}
	return true
}

// capturedByRun holds each pipeline's metrics under the id runPipeline gave
// its `test_capture` exporter, so pipelines of parallel tests do not mix.
var (
	capturedMu    sync.Mutex
	capturedByRun = map[string]*captured{}
	captureRuns   atomic.Int64
)

// takeCaptured returns and forgets the metrics of the run with id.
func takeCaptured(id string) *captured {
	capturedMu.Lock()
	defer capturedMu.Unlock()
	c := capturedByRun[id]
	delete(capturedByRun, id)
	return c
}

type captureExporter struct{ c *captured }

func metricKey(name string, values []string) string {
	if len(values) == 0 {
		return name
	}
	return name + "{" + strings.Join(values, ",") + "}"
}

type captureCounter struct {
	c   *captured
	key string
}

func (m captureCounter) Incr(n int64) {
	m.c.mu.Lock()
	m.c.counters[m.key] += n
	m.c.mu.Unlock()
}

type captureTimer struct {
	c   *captured
	key string
}

func (m captureTimer) Timing(int64) {
	m.c.mu.Lock()
	m.c.timings[m.key]++
	m.c.mu.Unlock()
}

type captureGauge struct{}

func (captureGauge) Set(int64) {}

func (e captureExporter) NewCounterCtor(name string, _ ...string) service.MetricsExporterCounterCtor {
	return func(values ...string) service.MetricsExporterCounter {
		return captureCounter{e.c, metricKey(name, values)}
	}
}

func (e captureExporter) NewTimerCtor(name string, _ ...string) service.MetricsExporterTimerCtor {
	return func(values ...string) service.MetricsExporterTimer {
		return captureTimer{e.c, metricKey(name, values)}
	}
}

func (e captureExporter) NewGaugeCtor(string, ...string) service.MetricsExporterGaugeCtor {
	return func(...string) service.MetricsExporterGauge { return captureGauge{} }
}

func (captureExporter) Close(context.Context) error { return nil }

func init() {
	service.MustRegisterMetricsExporter("test_capture", service.NewConfigSpec().Field(service.NewStringField("id")),
		func(conf *service.ParsedConfig, _ *service.Logger) (service.MetricsExporter, error) {
			id, err := conf.FieldString("id")
			if err != nil {
				return nil, err
			}
			c := &captured{counters: map[string]int64{}, timings: map[string]int{}}
			capturedMu.Lock()
			capturedByRun[id] = c
			capturedMu.Unlock()
			return captureExporter{c}, nil
		})
}
