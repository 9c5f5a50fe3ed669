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
### Throughput by partition keys

With `+"`preserve_order: true`"+` (the default) a request holds each partition key once and two requests in flight never hold the same key, so a key that is in every batch lands one record, or with `+"`aggregation.enabled`"+` one aggregated record, per round trip, whatever the shards or `+"`max_in_flight`"+`. Records per second written on a 2-core machine (`+"`make bench PART=keys`"+`: 4 shards, 200 B records, `+"`max_in_flight: 64`"+`, the default batching, requests answered after the added latency):

| distinct keys | added latency | ordered | ordered + aggregation | `+"`preserve_order: false`"+` |
|---|---|---|---|---|
| 1 | 0 | 2,770 | 112,245 | 157,332 |
| 4 | 0 | 16,429 | 185,496 | 160,562 |
| 64 | 0 | 91,626 | 232,330 | 94,148 |
| 1,024 | 0 | 130,995 | 210,330 | 285,828 |
| 1 | 30 ms | 32 | 5,245 | 228,819 |
| 4 | 30 ms | 128 | 7,500 | 111,093 |
| 64 | 30 ms | 1,918 | 15,000 | 230,199 |
| 1,024 | 30 ms | 20,165 | 26,000 | 166,283 |

At 30 ms a hot key lands about 33 records/s ordered, far below the 1,000 a shard accepts. When most of a batch's records wait for an earlier round trip of their key, the output logs once, at INFO, which setting lifts the ceiling: `+"`aggregation.enabled`"+` if the readers de-aggregate KPL records (the KCL, Flink, the `+"`kinesis`"+` input), or `+"`preserve_order: false`"+` if the order does not matter; `+"`kinesis_output_records_key_waited_total`"+` counts the records that waited.

Each batch is packed into PutRecords requests of at most 500 records and 5 MiB (data plus partition keys), up to `+"`max_in_flight`"+` requests in flight.

### Order

With `+"`preserve_order: true`"+` (the default), the records of one partition key land in the order the pipeline emitted them, even when Kinesis throttles or refuses some records, answers with a 5xx, a connection is cut, or the stream is resharded. A reader that follows shard lineage (this project's `+"`kinesis`"+` input, the KCL) reads them in that order. How:

- Up to `+"`max_in_flight`"+` batches are written at once, in the order the output's batching formed them: it numbers each batch as it forms it, and a batch that reaches the output before an earlier one (Benthos hands batches to its writers on separate goroutines) waits for that one to take its place, which it does before any round trip. A record whose partition key an earlier batch still being written also holds waits until that batch is done (every record of it written or failed for good); records of other keys go at once. So consecutive batches share round trips, and two requests in flight never hold the same key. `+"`ordered_batches_in_flight`"+` lowers how many batches are written at once; `+"`1`"+` writes one at a time. A batch that could only wait is not formed: while one batch waits with nothing it may send (every record left is of a key an earlier batch holds), the output's batching holds the next one back, and with it the input, so batches that share their keys cost the memory of two or three, not of `+"`max_in_flight`"+`.
- A batch's records are grouped by the shard they map to (the stream's shard map, read at connect) and sent in rounds: each round takes every shard's next records (each partition key once), packs them into as few full PutRecords requests as the limits allow (records of several shards share a request; a shard's records may fill several), sends those in parallel, up to `+"`max_in_flight`"+`, and waits for them.
- A request holds each partition key at most once (as a plain record or inside one aggregated record), so a partial failure never lets a key's later record land before an earlier one. Many records of few keys therefore take several requests; aggregation packs them into one record per request instead.
- Records Kinesis refused are retried before the next round is sent.
- A message that fails for good (after `+"`max_retries`"+` or `+"`backoff.max_elapsed_time`"+`) fails the later messages of its partition key in the batch too, unsent, and those of the batches that were waiting for it, so that a replay (a `+"`fallback`"+` output, `+"`auto_replay_nacks`"+`) keeps them in order. Batches that reach the output after its batch has ended are not held back: order across a message that failed for good is then up to how the pipeline replays it.
- A batch is acknowledged only when all its own records are written, whatever the batches around it do.

Without batching (`+"`batching: {}`"+`) nothing numbers the batches, and two batches Benthos hands over within the same instant may reach the output in either order; batches are then written one at a time, in the order they arrive, unless `+"`ordered_batches_in_flight`"+` is set above 1, which accepts that rare swap (a pipeline with several processor threads already gives batches no order) for round trips that overlap.

The order kept is the order in which messages reach the output. A pipeline with processors runs them, by default, on one thread per core (`+"`pipeline.threads: -1`"+`), and each thread passes its messages on when its processing ends, so two of a key's messages (or two batches of an input that emits batches) can swap before the output sees them. When order matters, set `+"`pipeline.threads: 1`"+`; likewise a `+"`broker`"+` of several inputs gives no order between them.

Throughput comes from batches in flight whose round trips overlap (at 30 to 100 ms per PutRecords an ordered output writes within 0.8× of `+"`preserve_order: false`"+`, see the performance guide), and from full batches that span many shards and fill their requests. Keys shared by consecutive batches cost a round trip each: a key that is in every batch lands at most one record (or, with aggregation, one aggregated record) per round trip. `+"`batching`"+` therefore defaults to `+"`count: 500`"+` and `+"`period: 50ms`"+`: under load a batch is one full PutRecords request; Benthos measures the period from the previous flush, so a message arriving after a quiet spell is written at once, and at moderate rates a message waits at most 50ms. If you set your own `+"`period`"+`, make it longer than one write takes: a shorter one yields batches of a single message while the output is busy. A batch larger than a request goes out in one round trip as long as it holds each partition key once. Setting `+"`batching`"+` replaces the whole default; `+"`batching: {}`"+` turns batching off, which suits an input that already emits batches (they are then written as they come, without the period's wait). Either way a message that fails is reported alone: a `+"`fallback`"+` output gets exactly the failed messages of an input's batch, each with its own reason.

With `+"`preserve_order: false`"+`, up to `+"`max_in_flight`"+` batches are written at once and a batch's requests are sent concurrently; records of one key can then land in any order (Kinesis itself does not keep the order of a PutRecords request's records when some are refused).

When Kinesis refuses some records of a request (throttling, `+"`InternalFailure`"+`, KMS errors), only those records are sent again, with exponential backoff and jitter, until `+"`max_retries`"+` or `+"`backoff.max_elapsed_time`"+` is reached. Records Kinesis accepted are never sent again by this output. The messages that still fail are reported one by one with Kinesis' error code, so a `+"`fallback`"+` output, or an input whose `+"`auto_replay_nacks`"+` replays failed messages only (most Benthos inputs), handles exactly those. The `+"`kinesis`"+` input replays a nacked batch whole, so with it the messages of that batch that did land are written again (at least once).

A message that can never be written fails alone, before anything is sent, and the rest of the batch is written: an empty partition key or one longer than 256 characters, a hash key that is not a decimal integer in [0, 2^128), an interpolation error, or a record (data plus partition key) larger than `+"`max_record_size`"+`. It fails the same way every time it is sent again, so an input that replays failed messages (at least once) retries it forever; the error names the field to fix, and a `+"`fallback`"+` output whose next output takes such messages sets them aside (see config/examples/output_dlq.yaml).

### Aggregation

With `+"`aggregation.enabled`"+`, small messages bound for the same shard (the MD5 of their partition key, or their hash key, against the stream's shard map read at connect) are packed into KPL aggregated records, readable by the KCL, Flink and the `+"`kinesis`"+` input. This multiplies the records per second a shard accepts. If an aggregated record fails for good, every message in it fails.

An aggregated record never holds messages of two current shards. After a split or merge the map is stale until refreshed (every minute, and at once when Kinesis answers that a record landed on a shard other than the predicted one). An aggregated record that landed on a shard which does not hold all its members is one the KCL drops whole, so its messages are sent again, grouped by the fresh map, and, in ordered mode, ahead of everything its old shard had not sent yet. That stray copy stays in the stream: a reader that does not check members against its shard's hash key range (as the KCL does) reads those messages twice.
`).
		Fields(
			service.NewStringField(fieldStream).
				Description("The stream to write to, by name (`orders`) or ARN (`arn:aws:kinesis:us-east-1:123456789012:stream/orders`). It has no example value, so that a config from `connect-kinesis create` names no stream until you do (`lint` refuses it empty).").
				LintRule(lintStream),
			service.NewInterpolatedStringField(fieldPartitionKey).
				Description("The partition key of each message, 1 to 256 characters: messages with the same key go to the same shard and, with `"+fieldPreserveOrder+"` (the default), land in order. A key that is one metadata value, `${! meta(\"key\") }`, skips Bloblang. A query that finds no value gives the key `null`, logged and counted in `kinesis_output_null_partition_keys_total`; give a default with `.or(...)`. See [tuning](../../tuning.md#partition_key-output).").
				Examples(`${! json("user_id") }`, `${! meta("kafka_key") }`, `${! uuid_v4() }`),
			service.NewInterpolatedStringField(fieldHashKey).
				Description("An explicit hash key, a decimal integer in [0, 2^128), that picks the shard instead of the partition key's hash.").
				Optional().Advanced(),
			service.NewOutputMaxInFlightField().
				Description("The most PutRecords requests in flight, and with `"+fieldPreserveOrder+": false` the most batches written at once (with `"+fieldPreserveOrder+": true` that is `"+fieldOrderedBatches+"`)."),
			service.NewBoolField(fieldPreserveOrder).
				Description("Keep the records of each partition key in the order they reached the output, through retries, partial failures and reshards (see Order above). Set `false` for the most throughput when order does not matter: a key's records then never wait for each other.").
				Default(true),
			service.NewIntField(fieldOrderedBatches).
				Description("`0` (the default) picks `"+fieldMaxInFlight+"` with batching, keeping the order batching formed, and 1 with `"+fieldBatching+": {}`. With `"+fieldPreserveOrder+": true`, how many batches are written at once, 1 to `"+fieldMaxInFlight+"`. Without batching, a value above 1 may swap two batches handed over in the same instant: set it for long round trips (30 ms or more). See [tuning](../../tuning.md#ordered_batches_in_flight-output).").
				Default(0).Advanced(),
			service.NewBatchPolicyField(fieldBatching).
				Description(fmt.Sprintf("By default up to %d messages, or what arrives within %s of the previous batch, whichever comes first: full PutRecords requests under load, no wait when messages are sparse. Setting the field replaces the whole default; `batching: {}` turns batching off. Batching or not, a message that fails is reported alone, with its own reason. See [tuning](../../tuning.md#batching-output).", defaultBatchCount, defaultBatchPeriod)).
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
