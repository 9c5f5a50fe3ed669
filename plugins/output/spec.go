package output

import (
	"fmt"

	"github.com/redpanda-data/benthos/v4/public/service"

	"github.com/connect-kinesis/connect-kinesis/internal/awsconf"
	"github.com/connect-kinesis/connect-kinesis/internal/kinesisx"
)

// The output's config: field names, defaults, the spec users read in the
// docs, and its registration. The constructor and the methods are in
// output.go.

// Field names.
const (
	fieldStream        = "stream"
	fieldPartitionKey  = "partition_key"
	fieldHashKey       = "hash_key"
	fieldMaxInFlight   = "max_in_flight"
	fieldPreserveOrder = "preserve_order"
	// fieldOrderedBatches is how many batches an ordered output writes at
	// once (see batchesInFlight).
	fieldOrderedBatches = "ordered_batches_in_flight"
	fieldBatching       = "batching"
	fieldMaxRecordSize  = "max_record_size"
	fieldAggregation    = "aggregation"
	fieldAggEnabled     = "enabled"
	fieldAggMaxBytes    = "max_bytes"
	fieldAggMaxRecords  = "max_records"
)

// The default batching policy: up to 500 messages (one full PutRecords
// request) gathered for at most defaultBatchPeriod. Benthos
// measures the period from the previous flush, so a message arriving after
// a quiet spell goes out at once, and under load the period must outlast
// one write, else every batch flushed while the writer is busy holds a
// single message.
const (
	defaultBatchCount  = 500
	defaultBatchPeriod = "50ms"
)

// Defaults of the aggregation fields, those of the KPL where it has one.
const (
	defaultAggMaxBytes   = 50 << 10
	defaultAggMaxRecords = 1000
	// minAggMaxBytes leaves room for the aggregate's magic, digest and at
	// least one small record.
	minAggMaxBytes = 256
)

func spec() *service.ConfigSpec {
	return service.NewConfigSpec().
		Stable().
		Categories("Services", "AWS").
		Summary("Writes messages to an Amazon Kinesis data stream.").
		Description(`
Each batch is packed into PutRecords requests of at most 500 records and 5 MiB, up to `+"`max_in_flight`"+` requests in flight. When Kinesis refuses some records of a request, only those are sent again, with backoff, until `+"`max_retries`"+` or `+"`backoff.max_elapsed_time`"+`; records Kinesis accepted are never sent again. Messages that still fail are reported one by one with Kinesis' error code, so a `+"`fallback`"+` output handles exactly those (the `+"`kinesis`"+` input replays its whole batch: at least once). A message that can never be written (a bad partition or hash key, an interpolation error, a record over `+"`max_record_size`"+`) fails alone before anything is sent; see config/examples/output_dlq.yaml.

New here? Start with [getting started](../../getting-started.md); then [running in production](../../deploy.md), [tuning](../../tuning.md#the-output-partition-keys-batching-and-ordered-batches) and [migrating from `+"`aws_kinesis`"+`](../../migrating.md).

### Order

With `+"`preserve_order: true`"+` (the default) the records of one partition key land in the order they reached the output, through throttling, partial failures, 5xx answers, cut connections and reshards; a reader that follows shard lineage (the `+"`kinesis`"+` input, the KCL) reads them in that order. Batches are written in the order batching formed them, up to `+"`max_in_flight`"+` (or `+"`ordered_batches_in_flight`"+`) at once; a record whose key an earlier batch still holds waits for it, a request holds each key once, and refused records are retried before the next round. A message that fails for good fails the later messages of its key in its batch and in the batches waiting on it, so a replay keeps them in order. Without batching (`+"`batching: {}`"+`) batches are written one at a time unless `+"`ordered_batches_in_flight`"+` is above 1. The order kept is the order messages reach the output: set `+"`pipeline.threads: 1`"+` when order matters. With `+"`preserve_order: false`"+` records of one key land in any order. See [architecture](../../architecture.md#a-messages-way-out-output).

A key that is in every batch lands one record (or one aggregated record) per round trip: about 33 records/s at 30 ms. The output then logs once at INFO; enable `+"`aggregation.enabled`"+` if the readers de-aggregate KPL records, or set `+"`preserve_order: false`"+`. `+"`kinesis_output_records_key_waited_total`"+` counts the records that waited. Figures: [performance](../../performance.md#the-outputs-few-keys-ceiling-make-bench-partkeys).

### Aggregation

With `+"`aggregation.enabled`"+`, small messages bound for one shard (by the stream's shard map) are packed into KPL aggregated records, readable by the KCL, Flink and the `+"`kinesis`"+` input; if one fails for good, every message in it fails. After a reshard the map is refreshed (every minute, and at once when a record lands on an unexpected shard), and an aggregated record that landed on a shard not holding all its members is sent again by the fresh map. That stray copy stays in the stream: a reader that does not check members against its shard's hash key range (as the KCL does) reads those messages twice.
`).
		Fields(
			service.NewStringField(fieldStream).
				Description("The stream to write to, by name (`orders`) or ARN. It has no example value, so `lint` refuses a config from `connect-kinesis create` until you name one.").
				LintRule(lintStream),
			service.NewInterpolatedStringField(fieldPartitionKey).
				Description("The partition key of each message, 1 to 256 characters: messages with one key go to one shard and, with `"+fieldPreserveOrder+"`, land in order. A query that finds no value gives the key `null` (counted in `kinesis_output_null_partition_keys_total`); give a default with `.or(...)`. See [tuning](../../tuning.md#partition_key-output).").
				Examples(`${! json("user_id") }`, `${! meta("kafka_key") }`, `${! uuid_v4() }`),
			service.NewInterpolatedStringField(fieldHashKey).
				Description("An explicit hash key, a decimal integer in [0, 2^128), that picks the shard instead of the partition key's hash.").
				Optional().Advanced(),
			service.NewOutputMaxInFlightField().
				Description("The most PutRecords requests in flight, and with `"+fieldPreserveOrder+": false` the most batches written at once (with `"+fieldPreserveOrder+": true` that is `"+fieldOrderedBatches+"`)."),
			service.NewBoolField(fieldPreserveOrder).
				Description("`true` (the default): each partition key's records land in the order they reached the output (see Order above). `false`: the most throughput, in any order.").
				Default(true),
			service.NewIntField(fieldOrderedBatches).
				Description("`0` (the default): `"+fieldMaxInFlight+"` with batching, 1 with `"+fieldBatching+": {}`. With `"+fieldPreserveOrder+": true`, how many batches are written at once. Without batching, above 1 may swap two batches handed over in the same instant. See [tuning](../../tuning.md#ordered_batches_in_flight-output).").
				Default(0).Advanced(),
			service.NewBatchPolicyField(fieldBatching).
				Description(fmt.Sprintf("By default up to %d messages, or what arrives within %s of the previous batch: full requests under load, no wait when messages are sparse. Setting the field replaces the whole default (keep `period` longer than one write); `batching: {}` turns batching off. See [tuning](../../tuning.md#batching-output).", defaultBatchCount, defaultBatchPeriod)).
				Default(map[string]any{"count": defaultBatchCount, "byte_size": 0, "period": defaultBatchPeriod, "check": "", "processors": []any{}}),
			service.NewIntField(fieldMaxRecordSize).
				Description(fmt.Sprintf("The largest record in bytes, counting data and partition key. Kinesis allows %d by default; a stream raised with UpdateMaxRecordSize accepts up to %d. Larger messages fail alone.", kinesisx.DefaultMaxRecordSize, kinesisx.MaxRecordSizeLimit)).
				Default(kinesisx.DefaultMaxRecordSize).Advanced(),
			service.NewObjectField(fieldAggregation,
				service.NewBoolField(fieldAggEnabled).
					Description("Pack small messages bound for the same shard into KPL aggregated records.").
					Default(false),
				service.NewIntField(fieldAggMaxBytes).
					Description("The largest aggregated record in bytes. Messages larger than this are sent as plain records.").
					Default(defaultAggMaxBytes),
				service.NewIntField(fieldAggMaxRecords).
					Description("The most messages in one aggregated record.").
					Default(defaultAggMaxRecords),
			).Description("KPL aggregation of small records.").Advanced(),
		).
		Fields(kinesisx.RetryFields(kinesisx.DefaultBackoff)...).
		Fields(awsconf.Fields()...).
		LintRule(lintRule()).
		Example("Write JSON events keyed by user", "Events of one user land on one shard, in the order the pipeline emitted them. The default batching (up to 500 messages, 50ms) writes many shards per round trip.", `
output:
  kinesis:
    stream: events
    region: us-east-1
    partition_key: ${! json("user_id") }
`)
}

func init() {
	err := service.RegisterBatchOutput("kinesis", spec(),
		func(conf *service.ParsedConfig, mgr *service.Resources) (service.BatchOutput, service.BatchPolicy, int, error) {
			return newOutput(conf, mgr)
		})
	if err != nil {
		panic(err)
	}
}
