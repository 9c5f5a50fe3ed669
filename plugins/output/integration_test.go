package output

import (
	"bufio"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/redpanda-data/benthos/v4/public/service"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	_ "github.com/redpanda-data/benthos/v4/public/components/io"
	_ "github.com/redpanda-data/benthos/v4/public/components/pure"

	"github.com/connect-kinesis/connect-kinesis/internal/faultproxy"
	"github.com/connect-kinesis/connect-kinesis/internal/kpl"
	"github.com/connect-kinesis/connect-kinesis/internal/producer"
	"github.com/connect-kinesis/connect-kinesis/internal/producer/producertest"
	"github.com/connect-kinesis/connect-kinesis/internal/testenv"
)

// emulators are the two the output must work on.
var emulators = []string{testenv.KindKinesisMock, testenv.KindKinesalite}

// TestMain gives the AWS SDK the test credentials through the process
// environment, where it reads them: once here, because parallel tests cannot
// call t.Setenv. It stops the shared emulators at the end.
func TestMain(m *testing.M) {
	for k, v := range map[string]string{
		"AWS_ACCESS_KEY_ID": testenv.AccessKey, "AWS_SECRET_ACCESS_KEY": testenv.SecretKey,
		"AWS_REGION": testenv.Region, "AWS_EC2_METADATA_DISABLED": "true",
	} {
		os.Setenv(k, v)
	}
	code := m.Run()
	testenv.CloseShared()
	os.Exit(code)
}

// runPipeline runs a YAML pipeline to completion with env as its only
// environment variables, and returns the metrics it recorded.
func runPipeline(t *testing.T, yaml string, env map[string]string) *captured {
	t.Helper()
	return runStream(t, yaml, env)
}

// runStream is runPipeline for a pipeline whose output names its region and
// credentials itself. (TestMain now sets the credentials for every test, so
// both run in parallel; runPipeline stays for the callers that use it.)
func runStream(t *testing.T, yaml string, env map[string]string) *captured {
	t.Helper()
	id := fmt.Sprint(captureRuns.Add(1))
	b := service.NewStreamBuilder()
	b.SetEnvVarLookupFunc(func(k string) (string, bool) {
		v, ok := env[k]
		return v, ok
	})
	require.NoError(t, b.SetYAML(yaml))
	// After SetYAML, which would reset the logger to the config's default.
	require.NoError(t, b.SetLoggerYAML("level: warn"))
	require.NoError(t, b.SetMetricsYAML("test_capture: { id: \""+id+"\" }"))
	stream, err := b.Build()
	require.NoError(t, err)
	ctx, cancel := contextWithTimeout(t, 2*time.Minute)
	defer cancel()
	require.NoError(t, stream.Run(ctx))
	return takeCaptured(id)
}

const generatePipeline = `
input:
  generate:
    count: ${COUNT}
    interval: ""
    mapping: |
      root.n = counter()
      root.body = "record %d".format(counter())
pipeline:
  processors:
    - mapping: |
        root = this.body + " of user-" + (this.n % 97).string()
        meta key = "user-%d".format(this.n % 97)
output:
  kinesis:
    stream: ${STREAM}
    endpoint: ${ENDPOINT}
    partition_key: ${! @key }
    aggregation:
      enabled: ${AGGREGATE:false}
    max_retries: 0
    backoff:
      initial_interval: 10ms
      max_interval: 200ms
      max_elapsed_time: 2m
    batching:
      count: 500
      period: ${BATCH_PERIOD:20ms}
`

// expected is what generatePipeline writes: body -> partition key.
func expected(n int) map[string]string {
	want := make(map[string]string, n)
	for i := 1; i <= n; i++ {
		want[fmt.Sprintf("record %d of user-%d", i, i%97)] = fmt.Sprintf("user-%d", i%97)
	}
	return want
}

// assertLandedOnce reads the stream back and checks each expected body landed
// exactly once, with its key.
func assertLandedOnce(t *testing.T, emu *testenv.Kinesis, stream string, want map[string]string) {
	t.Helper()
	got, err := producertest.ReadAll(t.Context(), emu.Client(), stream)
	require.NoError(t, err)
	seen := map[string]int{}
	for _, r := range got {
		body := string(r.Data)
		seen[body]++
		key, ok := want[body]
		if assert.True(t, ok, "unexpected record %q", body) {
			assert.Equal(t, key, aws.ToString(r.PartitionKey), "key of %q", body)
		}
	}
	missing, dup := 0, 0
	for body := range want {
		switch seen[body] {
		case 0:
			missing++
		case 1:
		default:
			dup++
		}
	}
	assert.Zero(t, missing, "records missing")
	assert.Zero(t, dup, "records written more than once")
	assert.Len(t, got, len(want))
}

// TestIntegrationOutput runs the output against each emulator: one emulator
// per kind, one stream per case.
func TestIntegrationOutput(t *testing.T) {
	t.Parallel()
	for _, kind := range emulators {
		t.Run(kind, func(t *testing.T) {
			t.Parallel()
			emu := testenv.NewEmulator(t, kind)
			t.Run("pipeline writes every record", func(t *testing.T) { testPipelineWritesEveryRecord(t, emu) })
			t.Run("exactly once through faults", func(t *testing.T) { testExactlyOnceThroughFaults(t, emu) })
			t.Run("dlq example", func(t *testing.T) { testDLQExample(t, emu) })
			t.Run("basic example", func(t *testing.T) { testBasicExample(t, emu) })
			t.Run("aggregation", func(t *testing.T) { testAggregation(t, emu) })
			t.Run("order with defaults", func(t *testing.T) { testOrderWithDefaults(t, emu) })
			t.Run("order through faults", func(t *testing.T) { testOrderThroughFaults(t, emu) })
		})
	}
}

func testPipelineWritesEveryRecord(t *testing.T, emu *testenv.Kinesis) {
	const n = 5000
	// kinesis-mock slows down with records per shard: spread them.
	emu.MustCreateStream(t, "written", 8)
	m := runPipeline(t, generatePipeline, map[string]string{
		"COUNT": fmt.Sprint(n), "STREAM": "written", "ENDPOINT": emu.Endpoint,
	})
	assertLandedOnce(t, emu, "written", expected(n))
	assert.Equal(t, int64(n), m.Counter(producer.MetricRecords))
	assert.Positive(t, m.Counter(producer.MetricBytes))
	assert.Zero(t, m.Counter(producer.MetricFailed))
	assert.Zero(t, m.Counter(producer.MetricRetries))
	assert.Positive(t, m.Timings(producer.MetricPutLatency))
}

func testExactlyOnceThroughFaults(t *testing.T, emu *testenv.Kinesis) {
	const n = 3000
	emu.MustCreateStream(t, "faulty", 8)
	proxy, err := faultproxy.Start(emu.Endpoint, 3)
	require.NoError(t, err)
	t.Cleanup(func() { _ = proxy.Close() })
	// 20% of entries refused, 5% of requests failed whole (throttled or
	// 500), and some connections cut before the emulator sees the request.
	proxy.Set("PutRecords", faultproxy.Rule{
		EntryFailRate: 0.20,
		ThrottleRate:  0.025,
		ErrorRate:     0.025,
		CutRate:       0.05,
	})

	m := runPipeline(t, generatePipeline, map[string]string{
		"COUNT": fmt.Sprint(n), "STREAM": "faulty", "ENDPOINT": proxy.URL,
	})
	st := proxy.Stats("PutRecords")
	t.Logf("proxy: %+v", st)
	assert.Positive(t, st.EntriesRefused)
	assert.Positive(t, st.Throttled+st.Errors)
	assert.Positive(t, st.Cut)
	assertLandedOnce(t, emu, "faulty", expected(n))
	assert.Equal(t, int64(n), m.Counter(producer.MetricRecords), "accepted records are counted once")
	assert.Positive(t, m.Counter(producer.MetricRetries, faultproxy.CodeThrottled))
	assert.Positive(t, m.Counter(producer.MetricRetries, faultproxy.CodeInternalFailure))
	assert.Zero(t, m.Counter(producer.MetricFailed))
}

func testDLQExample(t *testing.T, emu *testenv.Kinesis) {
	yaml, err := os.ReadFile(filepath.Join("..", "..", "config", "examples", "output_dlq.yaml"))
	require.NoError(t, err)
	emu.MustCreateStream(t, "events", 4)
	dlq := filepath.Join(t.TempDir(), "dlq.jsonl")
	m := runPipeline(t, string(yaml), map[string]string{
		"COUNT": "1000", "KINESIS_STREAM": "events", "KINESIS_ENDPOINT": emu.Endpoint, "DLQ_PATH": dlq,
	})

	// The ten oversize messages (ids 100, 200, ... 1000) are in the file
	// with the reason; nothing else is.
	f, err := os.Open(dlq)
	require.NoError(t, err)
	defer f.Close()
	var ids []int
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		var line struct {
			Error string
			ID    int
			Size  int
		}
		require.NoError(t, json.Unmarshal(sc.Bytes(), &line))
		assert.Contains(t, line.Error, "record is too large")
		assert.Greater(t, line.Size, 1<<20)
		ids = append(ids, line.ID)
	}
	assert.ElementsMatch(t, []int{100, 200, 300, 400, 500, 600, 700, 800, 900, 1000}, ids)

	got, err := producertest.ReadAll(t.Context(), emu.Client(), "events")
	require.NoError(t, err)
	seen := map[int]int{}
	for _, r := range got {
		var m struct{ ID int }
		require.NoError(t, json.Unmarshal(r.Data, &m))
		assert.NotZero(t, m.ID%100, "an oversize message reached the stream")
		seen[m.ID]++
	}
	assert.Len(t, seen, 990)
	assert.Equal(t, int64(10), m.Counter(producer.MetricFailed))
	assert.Equal(t, int64(990), m.Counter(producer.MetricRecords))
	for id, c := range seen {
		assert.Equal(t, 1, c, "message %d", id)
	}
}

func testBasicExample(t *testing.T, emu *testenv.Kinesis) {
	yaml, err := os.ReadFile(filepath.Join("..", "..", "config", "examples", "output_basic.yaml"))
	require.NoError(t, err)
	emu.MustCreateStream(t, "basic", 2)
	runPipeline(t, string(yaml), map[string]string{
		"COUNT": "300", "KINESIS_STREAM": "basic", "KINESIS_ENDPOINT": emu.Endpoint,
	})
	got, err := producertest.ReadAll(t.Context(), emu.Client(), "basic")
	require.NoError(t, err)
	require.Len(t, got, 300)
	for _, r := range got {
		var m struct {
			User string
			Kind string
		}
		require.NoError(t, json.Unmarshal(r.Data, &m))
		assert.Equal(t, m.User, aws.ToString(r.PartitionKey))
		assert.NotEmpty(t, m.Kind)
	}
}

func testAggregation(t *testing.T, emu *testenv.Kinesis) {
	const n = 5000
	emu.MustCreateStream(t, "aggregated", 4)
	runPipeline(t, generatePipeline, map[string]string{
		"COUNT": fmt.Sprint(n), "STREAM": "aggregated", "ENDPOINT": emu.Endpoint, "AGGREGATE": "true",
		// Full batches, however slow the machine: aggregation packs
		// within a batch, and this test counts how much it packed.
		"BATCH_PERIOD": "10s",
	})

	shards, err := producer.LoadShardMap(t.Context(), emu.Client(), "aggregated")
	require.NoError(t, err)
	got, err := producertest.ReadAll(t.Context(), emu.Client(), "aggregated")
	require.NoError(t, err)
	want := expected(n)
	seen := map[string]int{}
	aggregates := 0
	for _, r := range got {
		users := []kpl.Record{{PartitionKey: aws.ToString(r.PartitionKey), Data: r.Data}}
		if kpl.IsAggregated(r.Data) {
			aggregates++
			users, err = kpl.Decode(r.Data)
			require.NoError(t, err)
		}
		for _, u := range users {
			body := string(u.Data)
			seen[body]++
			assert.Equal(t, want[body], u.PartitionKey, "key of %q", body)
			// Each user record sits in the shard its own key maps to, as
			// if it had been written alone.
			assert.Equal(t, r.ShardID, shards.ShardFor(producer.Entry{PartitionKey: u.PartitionKey}), "shard of %q", body)
		}
	}
	assert.Len(t, seen, n)
	for body, c := range seen {
		assert.Equal(t, 1, c, "%q written once", body)
	}
	assert.Less(t, len(got), n/10, "records were aggregated")
	assert.Positive(t, aggregates)
}
