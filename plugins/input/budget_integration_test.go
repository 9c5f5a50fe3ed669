package input

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/kinesis"
	"github.com/aws/aws-sdk-go-v2/service/kinesis/types"
	"github.com/redpanda-data/benthos/v4/public/service"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/connect-kinesis/connect-kinesis/internal/consumer"
	"github.com/connect-kinesis/connect-kinesis/internal/testenv"
)

// gaugeExporter is a Benthos metrics exporter that keeps the highest value
// each gauge was set to, by name.
type gaugeExporter struct {
	mu   sync.Mutex
	peak map[string]int64
}

var testGauges = &gaugeExporter{peak: map[string]int64{}}

func init() {
	service.MustRegisterMetricsExporter("input_test_gauges", service.NewConfigSpec(),
		func(*service.ParsedConfig, *service.Logger) (service.MetricsExporter, error) {
			return testGauges, nil
		})
}

type peakGauge struct {
	e    *gaugeExporter
	name string
}

func (g peakGauge) Set(n int64) {
	g.e.mu.Lock()
	defer g.e.mu.Unlock()
	g.e.peak[g.name] = max(g.e.peak[g.name], n)
}

func (peakGauge) Incr(int64)   {}
func (peakGauge) Timing(int64) {}

func (e *gaugeExporter) NewCounterCtor(string, ...string) service.MetricsExporterCounterCtor {
	return func(...string) service.MetricsExporterCounter { return peakGauge{} }
}

func (e *gaugeExporter) NewTimerCtor(string, ...string) service.MetricsExporterTimerCtor {
	return func(...string) service.MetricsExporterTimer { return peakGauge{} }
}

func (e *gaugeExporter) NewGaugeCtor(name string, _ ...string) service.MetricsExporterGaugeCtor {
	return func(...string) service.MetricsExporterGauge { return peakGauge{e, name} }
}

func (*gaugeExporter) Close(context.Context) error { return nil }

func (e *gaugeExporter) max(name string) int64 {
	e.mu.Lock()
	defer e.mu.Unlock()
	return e.peak[name]
}

// 64 shards with a backlog of large records (48 MiB) behind a slow
// pipeline: the input holds no more than its budget (8 MiB, plus the one
// answer that may go over it), shards wait for room, and every record
// arrives once, each key's records in the order they were written.
func TestIntegrationBudgetHoldsA64ShardBacklog(t *testing.T) {
	emu := testenv.NewEmulator(t, testenv.KindKinesalite)
	red := testenv.NewRedis(t)
	const stream, shards, perShard, size = "backlog", 64, 6, 128 << 10
	emu.MustCreateStream(t, stream, shards)
	const n = shards * perShard
	pad := strings.Repeat("x", size)
	var entries []types.PutRecordsRequestEntry
	for i := range n {
		entries = append(entries, types.PutRecordsRequestEntry{PartitionKey: aws.String(fmt.Sprintf("k%03d", i%200)), Data: []byte(fmt.Sprintf("r%05d/%s", i, pad))})
	}
	for start := 0; start < n; start += 30 { // PutRecords takes at most 5 MiB
		out, err := emu.Client().PutRecords(t.Context(), &kinesis.PutRecordsInput{StreamName: aws.String(stream), Records: entries[start:min(start+30, n)]})
		require.NoError(t, err)
		require.Zero(t, aws.ToInt32(out.FailedRecordCount))
	}

	const budget = 8 << 20
	var (
		mu   sync.Mutex
		seen = map[string]int{}
		keys = map[string][]string{} // payload ids per key, in delivery order
	)
	sb := service.NewStreamBuilder()
	require.NoError(t, sb.SetLoggerYAML("level: warn"))
	require.NoError(t, sb.SetMetricsYAML("input_test_gauges: {}"))
	require.NoError(t, sb.AddInputYAML(inputYAML(stream, emu.Endpoint, red.URL(), "g1", fmt.Sprintf("  max_buffered_bytes: %d\n", budget))))
	require.NoError(t, sb.AddBatchConsumerFunc(func(_ context.Context, b service.MessageBatch) error {
		time.Sleep(20 * time.Millisecond) // a pipeline slower than Kinesis
		mu.Lock()
		defer mu.Unlock()
		for _, m := range b {
			data, _ := m.AsBytes()
			key, _ := m.MetaGet(MetaPartitionKey)
			id := string(data[:6])
			seen[id]++
			keys[key] = append(keys[key], id)
		}
		return nil
	}))
	s, err := sb.Build()
	require.NoError(t, err)
	rs := &runningStream{stream: s, done: make(chan error, 1)}
	go func() { rs.done <- s.Run(context.Background()) }()
	t.Cleanup(func() { rs.stop(t) })

	require.Eventually(t, func() bool {
		mu.Lock()
		defer mu.Unlock()
		return len(seen) == n
	}, 3*time.Minute, 200*time.Millisecond)
	rs.stop(t)

	for id, c := range seen {
		assert.Equal(t, 1, c, "record %s delivered %d times", id, c)
	}
	for key, ids := range keys {
		for i := 1; i < len(ids); i++ {
			assert.Less(t, ids[i-1], ids[i], "key %s: %s after %s", key, ids[i], ids[i-1])
		}
	}
	assert.Equal(t, int64(budget), testGauges.max(consumer.MetricMaxBufferedBytes))
	peak := testGauges.max(consumer.MetricBufferedBytes)
	assert.LessOrEqual(t, peak, int64(budget+perShard*size+perShard*(1<<10)), "held %d bytes at most for a budget of %d", peak, budget)
	assert.Greater(t, peak, int64(budget/2), "the budget was used")
	assert.Positive(t, testGauges.max(consumer.MetricShardsWaitingForBuffer), "shards waited for room")
	t.Logf("peak held %.1f MiB of a %d MiB budget; up to %d shards waited", float64(peak)/(1<<20), budget>>20, testGauges.max(consumer.MetricShardsWaitingForBuffer))
}
