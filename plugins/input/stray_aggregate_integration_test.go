package input

import (
	"context"
	"fmt"
	"math/big"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/kinesis"
	"github.com/redpanda-data/benthos/v4/public/service"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/connect-kinesis/connect-kinesis/internal/consumer"
	"github.com/connect-kinesis/connect-kinesis/internal/kinesisx"
	"github.com/connect-kinesis/connect-kinesis/internal/producer"
	"github.com/connect-kinesis/connect-kinesis/internal/producer/producertest"
	"github.com/connect-kinesis/connect-kinesis/internal/testenv"
)

// countingExporter is a Benthos metrics exporter that sums every counter,
// keyed "name{v1,v2,...}" by label values (Benthos adds label and path
// first); tests tell theirs apart by stream.
type countingExporter struct {
	mu       sync.Mutex
	counters map[string]int64
}

var testCounters = &countingExporter{counters: map[string]int64{}}

func init() {
	service.MustRegisterMetricsExporter("input_test_counters", service.NewConfigSpec(),
		func(*service.ParsedConfig, *service.Logger) (service.MetricsExporter, error) {
			return testCounters, nil
		})
}

type countingCounter struct {
	e   *countingExporter
	key string
}

func (c countingCounter) Incr(n int64) {
	c.e.mu.Lock()
	defer c.e.mu.Unlock()
	c.e.counters[c.key] += n
}

func (c countingCounter) Timing(int64) {}
func (countingCounter) Set(int64)      {}

func (e *countingExporter) NewCounterCtor(name string, _ ...string) service.MetricsExporterCounterCtor {
	return func(values ...string) service.MetricsExporterCounter {
		return countingCounter{e, name + "{" + strings.Join(values, ",") + "}"}
	}
}

func (e *countingExporter) NewTimerCtor(string, ...string) service.MetricsExporterTimerCtor {
	return func(...string) service.MetricsExporterTimer { return countingCounter{} }
}

func (e *countingExporter) NewGaugeCtor(string, ...string) service.MetricsExporterGaugeCtor {
	return func(...string) service.MetricsExporterGauge { return countingCounter{} }
}

func (*countingExporter) Close(context.Context) error { return nil }

// get sums a counter over the labels Benthos adds (label, path) for the
// given values of the input's own labels.
func (e *countingExporter) get(name string, values ...string) int64 {
	e.mu.Lock()
	defer e.mu.Unlock()
	var n int64
	suffix := "," + strings.Join(values, ",") + "}"
	for k, v := range e.counters {
		if strings.HasPrefix(k, name+"{") && strings.HasSuffix(k, suffix) {
			n += v
		}
	}
	return n
}

// startCounted runs the input into col, its counters into testCounters.
func startCounted(t *testing.T, inYAML string, col *collector) *runningStream {
	t.Helper()
	sb := service.NewStreamBuilder()
	require.NoError(t, sb.SetLoggerYAML("level: warn"))
	require.NoError(t, sb.SetMetricsYAML("input_test_counters: {}"))
	require.NoError(t, sb.AddInputYAML(inYAML))
	require.NoError(t, sb.AddBatchConsumerFunc(func(_ context.Context, b service.MessageBatch) error {
		col.add(b)
		return nil
	}))
	s, err := sb.Build()
	require.NoError(t, err)
	rs := &runningStream{stream: s, done: make(chan error, 1)}
	go func() { rs.done <- s.Run(context.Background()) }()
	t.Cleanup(func() { rs.stop(t) })
	return rs
}

// A producer whose shard map predates a split writes aggregates that land
// on one child while holding members of both; it then sends all their
// members again, grouped by the new shards. The input reads both children:
// the stray aggregates are dropped whole and counted (as KCL drops them),
// so every record is delivered once and each key's records in the order
// they were written.
func TestIntegrationStrayAggregatesAfterASplitAreDropped(t *testing.T) {
	t.Parallel()
	emu := testenv.NewKinesisMock(t)
	red := testenv.NewRedis(t)
	const stream = "stray-aggregates"
	emu.MustCreateStream(t, stream, 1)
	client := emu.Client()

	p := producer.New(client, producer.Config{
		StreamName: stream, Ordered: false, MaxInFlight: 1,
		Backoff:     kinesisx.Backoff{InitialInterval: 10 * time.Millisecond, MaxInterval: 100 * time.Millisecond, MaxElapsedTime: 10 * time.Second},
		Aggregation: producer.Aggregation{Enabled: true, MaxBytes: 4096, MaxRecords: 20},
	}, service.MockResources().Logger(), nil)
	require.NoError(t, p.RefreshShardMap(t.Context()))
	const keys = 40
	next := 0
	write := func(n int) {
		t.Helper()
		entries := make([]producer.Entry, n)
		for i := range entries {
			entries[i] = producer.Entry{PartitionKey: fmt.Sprintf("key-%d", (next+i)%keys), Data: []byte(fmt.Sprintf("key-%d:%d", (next+i)%keys, next+i))}
		}
		next += n
		for i, err := range p.Write(t.Context(), entries) {
			require.NoError(t, err, "entry %d", i)
		}
	}
	write(200)
	// The stream splits; the producer's map is now stale.
	_, err := client.SplitShard(t.Context(), &kinesis.SplitShardInput{
		StreamName: aws.String(stream), ShardToSplit: aws.String(openShards(t, client, stream)[0]),
		NewStartingHashKey: aws.String(new(big.Int).Lsh(big.NewInt(1), 127).String()),
	})
	require.NoError(t, err)
	_, err = emu.WaitActive(t.Context(), stream)
	require.NoError(t, err)
	write(200)
	write(200)

	raw, err := producertest.ReadStream(t.Context(), client, stream)
	require.NoError(t, err)
	view, err := producertest.KCLRead(raw.Shards, raw.Records)
	require.NoError(t, err)
	t.Logf("a KCL reader of the stream drops %d of its %d aggregated records", view.Dropped, view.Aggregates)
	require.Positive(t, view.Dropped, "the stale map wrote no stray aggregate")
	col := &collector{}
	startCounted(t, inputYAML(stream, emu.Endpoint, red.URL(), "g", ""), col)
	require.Eventually(t, func() bool { return col.distinct() == next }, 60*time.Second, 100*time.Millisecond,
		"delivered %d of %d", col.distinct(), next)
	// Leave time for a late copy to arrive.
	time.Sleep(2 * time.Second)

	ds := col.snapshot()
	dropped := testCounters.get(consumer.MetricRecordsDropped, stream, consumer.DropOutsideHashRange)
	seen := map[string]int{}
	last := map[string]int{}
	inversions := 0
	for _, d := range ds {
		seen[d.data]++
		key, num, _ := strings.Cut(d.data, ":")
		n, err := strconv.Atoi(num)
		require.NoError(t, err)
		if l, ok := last[key]; ok && n < l {
			inversions++
		}
		last[key] = n
	}
	duplicates := len(ds) - len(seen)
	t.Logf("delivered %d messages, %d distinct, %d duplicates, %d per-key inversions, %d user records dropped outside their shard's range",
		len(ds), len(seen), duplicates, inversions, dropped)
	assert.Positive(t, dropped, "the stale map wrote stray aggregates, and they are counted")
	assert.Zero(t, duplicates, "no record delivered twice")
	assert.Zero(t, inversions, "each key's records in the order they were written")
}
