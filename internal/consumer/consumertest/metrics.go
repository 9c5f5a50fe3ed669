package consumertest

import (
	"context"
	"strings"
	"sync"
	"testing"

	"github.com/redpanda-data/benthos/v4/public/service"
	"github.com/stretchr/testify/require"
)

// Exporter is a Benthos metrics exporter that keeps the last value of
// every gauge and the sum of every counter, keyed "name{v1,v2}" by label
// values.
type Exporter struct {
	mu     sync.Mutex
	gauges map[string]int64
}

// Gauges keeps what every test Metrics reported.
var Gauges = &Exporter{gauges: map[string]int64{}}

// testCounter adds into the exporter's map under its key.
type testCounter struct {
	e   *Exporter
	key string
}

func (c testCounter) Incr(n int64) {
	c.e.mu.Lock()
	defer c.e.mu.Unlock()
	c.e.gauges[c.key] += n
}

func init() {
	err := service.RegisterMetricsExporter("consumer_test_gauges", service.NewConfigSpec(),
		func(*service.ParsedConfig, *service.Logger) (service.MetricsExporter, error) { return Gauges, nil })
	if err != nil {
		panic(err)
	}
}

type nopCounter struct{}

func (nopCounter) Incr(int64) {}

func (nopCounter) Timing(int64) {}

type testGauge struct {
	e   *Exporter
	key string
}

func (g testGauge) Set(v int64) {
	g.e.mu.Lock()
	defer g.e.mu.Unlock()
	g.e.gauges[g.key] = v
}

func (e *Exporter) NewCounterCtor(name string, _ ...string) service.MetricsExporterCounterCtor {
	return func(values ...string) service.MetricsExporterCounter {
		return testCounter{e: e, key: name + "{" + strings.Join(values, ",") + "}"}
	}
}

func (e *Exporter) NewTimerCtor(string, ...string) service.MetricsExporterTimerCtor {
	return func(...string) service.MetricsExporterTimer { return nopCounter{} }
}

func (e *Exporter) NewGaugeCtor(name string, _ ...string) service.MetricsExporterGaugeCtor {
	return func(values ...string) service.MetricsExporterGauge {
		return testGauge{e: e, key: name + "{" + strings.Join(values, ",") + "}"}
	}
}

func (e *Exporter) Close(context.Context) error { return nil }

// Get is the last value of a gauge, or the sum of a counter, by
// "name{label values}".
func (e *Exporter) Get(key string) (int64, bool) {
	e.mu.Lock()
	defer e.mu.Unlock()
	v, ok := e.gauges[key]
	return v, ok
}

// Sum is the sum of every value whose key begins with prefix and holds
// each of parts.
func (e *Exporter) Sum(prefix string, parts ...string) int64 {
	e.mu.Lock()
	defer e.mu.Unlock()
	var n int64
next:
	for k, v := range e.gauges {
		if !strings.HasPrefix(k, prefix) {
			continue
		}
		for _, p := range parts {
			if !strings.Contains(k, p) {
				continue next
			}
		}
		n += v
	}
	return n
}

// Keys are the keys that begin with prefix, for a failure's message.
func (e *Exporter) Keys(prefix string) []string {
	e.mu.Lock()
	defer e.mu.Unlock()
	var keys []string
	for k := range e.gauges {
		if strings.HasPrefix(k, prefix) {
			keys = append(keys, k)
		}
	}
	return keys
}

// Metrics reports to Gauges.
func Metrics(t testing.TB) *service.Metrics {
	t.Helper()
	rb := service.NewResourceBuilder()
	require.NoError(t, rb.SetMetricsYAML("consumer_test_gauges: {}"))
	res, closeRes, err := rb.Build()
	require.NoError(t, err)
	t.Cleanup(func() { _ = closeRes(context.Background()) })
	return res.Metrics()
}
