package consumer

import (
	"context"
	"strings"
	"sync"
	"testing"
	"time"

	_ "github.com/redpanda-data/benthos/v4/public/components/pure"
	"github.com/redpanda-data/benthos/v4/public/service"
	"github.com/stretchr/testify/require"
)

// gaugeExporter is a Benthos metrics exporter that keeps the last value of
// every gauge and the sum of every counter, keyed "name{v1,v2}" by label
// values.
type gaugeExporter struct {
	mu     sync.Mutex
	gauges map[string]int64
}

var testGauges = &gaugeExporter{gauges: map[string]int64{}}

// testCounter adds into the exporter's map under its key.
type testCounter struct {
	e   *gaugeExporter
	key string
}

func (c testCounter) Incr(n int64) {
	c.e.mu.Lock()
	defer c.e.mu.Unlock()
	c.e.gauges[c.key] += n
}

func init() {
	err := service.RegisterMetricsExporter("consumer_test_gauges", service.NewConfigSpec(),
		func(*service.ParsedConfig, *service.Logger) (service.MetricsExporter, error) { return testGauges, nil })
	if err != nil {
		panic(err)
	}
}

type nopCounter struct{}

func (nopCounter) Incr(int64)   {}
func (nopCounter) Timing(int64) {}

type testGauge struct {
	e   *gaugeExporter
	key string
}

func (g testGauge) Set(v int64) {
	g.e.mu.Lock()
	defer g.e.mu.Unlock()
	g.e.gauges[g.key] = v
}

func (e *gaugeExporter) NewCounterCtor(name string, _ ...string) service.MetricsExporterCounterCtor {
	return func(values ...string) service.MetricsExporterCounter {
		return testCounter{e: e, key: name + "{" + strings.Join(values, ",") + "}"}
	}
}

func (e *gaugeExporter) NewTimerCtor(string, ...string) service.MetricsExporterTimerCtor {
	return func(...string) service.MetricsExporterTimer { return nopCounter{} }
}

func (e *gaugeExporter) NewGaugeCtor(name string, _ ...string) service.MetricsExporterGaugeCtor {
	return func(values ...string) service.MetricsExporterGauge {
		return testGauge{e: e, key: name + "{" + strings.Join(values, ",") + "}"}
	}
}

func (e *gaugeExporter) Close(context.Context) error { return nil }

func (e *gaugeExporter) get(key string) (int64, bool) {
	e.mu.Lock()
	defer e.mu.Unlock()
	v, ok := e.gauges[key]
	return v, ok
}

func testMetrics(t *testing.T) *service.Metrics {
	t.Helper()
	rb := service.NewResourceBuilder()
	require.NoError(t, rb.SetMetricsYAML("consumer_test_gauges: {}"))
	res, closeRes, err := rb.Build()
	require.NoError(t, err)
	t.Cleanup(func() { _ = closeRes(context.Background()) })
	return res.Metrics()
}

// The lag gauge of a shard drops to 0 when the shard leaves the instance,
// and kinesis_input_shards_unowned counts the ready shards nobody reads.
func TestLagAndUnownedGauges(t *testing.T) {
	api := newFakeKinesis()
	const s0, s1 = "shardId-000000000000", "shardId-000000000001"
	api.add(s0, &fakeShard{records: 5, behind: 4000})
	api.add(s1, &fakeShard{records: 5, behind: 4000})
	cfg := testConfig()
	st := newFakeStore(time.Hour)
	// A live member that reads nothing: this instance's fair share is one
	// of the two shards, so the other one has no reader.
	require.NoError(t, st.Heartbeat(t.Context(), "idle-member"))
	c := startConsumerWithMetrics(t, cfg, api, st, testMetrics(t))
	var b *Batch
	select {
	case b = <-c.Batches():
	case <-time.After(10 * time.Second):
		t.Fatal("no batch delivered")
	}
	lag := MetricMillisBehind + "{s," + b.Shard + "}"
	unowned := MetricShardsUnowned + "{s}"
	require.Eventually(t, func() bool { v, _ := testGauges.get(lag); return v == 4000 }, 5*time.Second, 10*time.Millisecond)
	require.Eventually(t, func() bool { v, ok := testGauges.get(unowned); return ok && v == 1 }, 5*time.Second, 10*time.Millisecond,
		"one ready shard has no reader")

	// The lease is lost: the shard leaves this instance, its lag with it.
	st.mu.Lock()
	st.loseOnRenew[b.Shard] = true
	st.mu.Unlock()
	b.Ack(nil)
	require.Eventually(t, func() bool { v, _ := testGauges.get(lag); return v == 0 }, 5*time.Second, 10*time.Millisecond,
		"the lag of a shard this instance no longer reads is not frozen at its last value")
	// Its fair share free again, the instance takes the shard nobody read;
	// the lost one is read by the instance that took it.
	require.Eventually(t, func() bool { v, _ := testGauges.get(unowned); return v == 0 }, 5*time.Second, 10*time.Millisecond)
}
