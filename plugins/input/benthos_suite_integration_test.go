package input

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/redpanda-data/benthos/v4/public/service/integration"

	"github.com/connect-kinesis/connect-kinesis/internal/testenv"
	_ "github.com/connect-kinesis/connect-kinesis/plugins/output"
)

// The standard connector suite of Benthos (public/service/integration), the
// one Redpanda Connect runs against each of its connectors: the kinesis
// output writes, the kinesis input reads, through kinesalite and a real
// redis-server. Each definition runs as a parallel subtest on its own
// stream (named from the suite's per-test id), group and Redis.
// docs/testing.md lists the definitions left out, and why.

// suiteInput is the kinesis input every definition reads with; the suite
// fills in $ID, the pre-test the emulator, Redis and the per-run settings.
const suiteInput = `kinesis:
  streams: [ suite-$ID ]
  region: $REGION
  endpoint: $KINESIS_ENDPOINT
  credentials: { id: $ACCESS_KEY, secret: $SECRET_KEY }
  start_position: trim_horizon
  checkpoint:
    redis: { url: $REDIS_URL }
    group: $ID
    commit_period: 200ms
  lease: { period: 2s, rebalance_period: 300ms, handoff_timeout: 1s }
  limit: $LIMIT
  shard_max_in_flight: $SHARD_MAX_IN_FLIGHT
  poll_interval: 200ms
  idle_poll_interval: 200ms
  shard_discovery_interval: 1s`

// suiteOutput is the kinesis output every definition writes with, with the
// suite's $MAX_IN_FLIGHT and $OUTPUT_BATCH_COUNT.
const suiteOutput = `kinesis:
  stream: suite-$ID
  partition_key: ${! uuid_v4() }
  region: $REGION
  endpoint: $KINESIS_ENDPOINT
  credentials: { id: $ACCESS_KEY, secret: $SECRET_KEY }
  max_in_flight: $MAX_IN_FLIGHT
  batching: { count: $OUTPUT_BATCH_COUNT }`

// suiteTemplate is the pipeline: the input as it is, or under a broker
// whose batching takes the suite's $INPUT_BATCH_COUNT.
func suiteTemplate(broker bool) string {
	in := indent(suiteInput, "  ")
	if broker {
		in = "  broker:\n    batching: { count: $INPUT_BATCH_COUNT }\n    inputs:\n      - " + strings.TrimSpace(indent(suiteInput, "        "))
	}
	return "input:\n" + in + "\noutput:\n" + indent(suiteOutput, "  ") + "\n"
}

func indent(s, by string) string { return by + strings.ReplaceAll(s, "\n", "\n"+by) }

// suiteOptions gives each definition its own one-shard stream (one shard:
// the definitions that check order across a restart expect one sequence)
// and Redis, and sets the input's per-run settings.
func suiteOptions(k *testenv.Kinesis, limit, shardMaxInFlight string, extra ...integration.StreamTestOptFunc) []integration.StreamTestOptFunc {
	return append([]integration.StreamTestOptFunc{
		integration.StreamTestOptTimeout(3 * time.Minute),
		integration.StreamTestOptVarSet("REGION", testenv.Region),
		integration.StreamTestOptVarSet("KINESIS_ENDPOINT", k.Endpoint),
		integration.StreamTestOptVarSet("ACCESS_KEY", testenv.AccessKey),
		integration.StreamTestOptVarSet("SECRET_KEY", testenv.SecretKey),
		integration.StreamTestOptVarSet("LIMIT", limit),
		integration.StreamTestOptVarSet("SHARD_MAX_IN_FLIGHT", shardMaxInFlight),
		integration.StreamTestOptPreTest(func(tb testing.TB, ctx context.Context, vars *integration.StreamTestConfigVars) {
			k.MustCreateStream(tb, "suite-"+vars.ID, 1)
			vars.General["REDIS_URL"] = testenv.NewRedis(tb).URL()
		}),
	}, extra...)
}

// TestIntegrationBenthosConnectorSuite runs every definition of the suite
// that fits Kinesis, in three runs: the input's defaults (batches as
// GetRecords answers them, one in flight per shard); one record per batch
// with several in flight, for the definitions that hold or nack single
// messages and restart the input; and the input under a broker's batching
// for the input batch count.
func TestIntegrationBenthosConnectorSuite(t *testing.T) {
	t.Parallel()
	k := testenv.SharedKinesalite(t)

	t.Run("defaults", func(t *testing.T) {
		t.Parallel()
		integration.StreamTests(
			integration.StreamTestOpenClose(),
			integration.StreamTestOpenCloseIsolated(),
			integration.StreamTestSendBatch(10),
			integration.StreamTestSendBatches(10, 20, 4),
			integration.StreamTestSendBatchCount(10),
			integration.StreamTestSendBatchCountIsolated(10),
			integration.StreamTestStreamSequential(100),
			integration.StreamTestStreamIsolated(100),
			integration.StreamTestStreamParallel(100),
		).Run(t, suiteTemplate(false), suiteOptions(k, "10000", "1", integration.StreamTestOptMaxInFlight(4))...)
	})

	// The definitions below receive one message per transaction, hold
	// some unacked while they take more, and nack some: one record per
	// GetRecords answer (limit: 1) and more than one batch in flight per
	// shard. After a restart the input resumes after the highest
	// contiguously acked record, which is what they expect.
	t.Run("one record per batch", func(t *testing.T) {
		t.Parallel()
		integration.StreamTests(append([]integration.StreamTestDefinition{
			integration.StreamTestCheckpointCapture(),
			integration.StreamTestStreamSaturatedUnacked(10),
			integration.StreamTestStreamParallelLossy(30),
			integration.StreamTestStreamParallelLossyThroughReconnect(30),
		}, raceFreeDefinitions()...)...).Run(t, suiteTemplate(false), suiteOptions(k, "1", "8")...)
	})

	// The input forms no batches of its own (a batch is what one
	// GetRecords answers); a broker's batching gives the count.
	t.Run("broker batching", func(t *testing.T) {
		t.Parallel()
		integration.StreamTests(
			integration.StreamTestReceiveBatchCount(10),
		).Run(t, suiteTemplate(true), suiteOptions(k, "10000", "1")...)
	})
}

// BenchmarkIntegrationBenthosConnectorSuite runs the suite's benchmark
// definitions (records/s through the output, the input, and both) on
// kinesalite: figures of the emulator on this machine, not of Kinesis.
func BenchmarkIntegrationBenthosConnectorSuite(b *testing.B) {
	k := testenv.SharedKinesalite(b)
	integration.StreamBenchs(
		integration.StreamBenchSend(20, 2),
		integration.StreamBenchWrite(20),
		integration.StreamBenchReadSaturated(),
	).Run(b, suiteTemplate(false), suiteOptions(k, "10000", "1", integration.StreamTestOptMaxInFlight(4))...)
}
