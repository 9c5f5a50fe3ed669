package consumertest

import (
	"context"
	"strings"
	"sync"
	"testing"

	"github.com/redpanda-data/benthos/v4/public/service"
	"github.com/stretchr/testify/require"
)

// gaugeExporter is a Benthos metrics exporter that keeps the last value of
// every gauge and the sum of every counter, keyed "name{v1,v2}" by label
// values.
type GaugeExporter struct {
	Mu     sync.Mutex
	Gauges map[string]int64
}

// Gauges keeps what every test Metrics reported.
var Gauges = &GaugeExporter{Gauges: map[string]int64{}}

// testCounter adds into the exporter's map under its key.
type TestCounter struct {
	E   *GaugeExporter
	Key string
}

func (c TestCounter) Incr(n int64) {
	c.E.Mu.Lock()
	defer c.E.Mu.Unlock()
	c.E.Gauges[c.Key] += n
}

func init() {
	err := service.RegisterMetricsExporter("consumer_test_gauges", service.NewConfigSpec(),
		func(*service.ParsedConfig, *service.Logger) (service.MetricsExporter, error) { return Gauges, nil })
	if err != nil {
		panic(err)
	}
}

type NopCounter struct{}

func (NopCounter) Incr(int64) {}

func (NopCounter) Timing(int64) {}

type TestGauge struct {
	E   *GaugeExporter
	Key string
}

func (g TestGauge) Set(v int64) {
	g.E.Mu.Lock()
	defer g.E.Mu.Unlock()
	g.E.Gauges[g.Key] = v
}

func (E *GaugeExporter) NewCounterCtor(name string, _ ...string) service.MetricsExporterCounterCtor {
	return func(values ...string) service.MetricsExporterCounter {
		return TestCounter{E: E, Key: name + "{" + strings.Join(values, ",") + "}"}
	}
}

func (E *GaugeExporter) NewTimerCtor(string, ...string) service.MetricsExporterTimerCtor {
	return func(...string) service.MetricsExporterTimer { return NopCounter{} }
}

func (E *GaugeExporter) NewGaugeCtor(name string, _ ...string) service.MetricsExporterGaugeCtor {
	return func(values ...string) service.MetricsExporterGauge {
		return TestGauge{E: E, Key: name + "{" + strings.Join(values, ",") + "}"}
	}
}

func (E *GaugeExporter) Close(context.Context) error { return nil }

// Get is the last value of a gauge, or the sum of a counter, by
// "name{label values}".
func (E *GaugeExporter) Get(Key string) (int64, bool) {
	E.Mu.Lock()
	defer E.Mu.Unlock()
	v, ok := E.Gauges[Key]
	return v, ok
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
