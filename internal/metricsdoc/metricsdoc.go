// Package metricsdoc describes every metric the kinesis input and output
// emit: its type, labels, unit and meaning. The component docs list them from
// here (internal/cmd/docgen) and the Prometheus exporter serves the
// descriptions as HELP text, so both stay in step with one list.
package metricsdoc

import "strings"

// Type is a Benthos metric type.
type Type string

// Metric types.
const (
	Counter Type = "counter"
	Gauge   Type = "gauge"
	Timer   Type = "timer"
)

// Metric is one metric as the plugins emit it through Benthos.
type Metric struct {
	// Name is the name the plugin gives Benthos. A timer's ends in `_ns`.
	Name string
	Type Type
	// Labels are the plugin's own; Benthos adds `label` and `path` to every
	// metric of a component.
	Labels []string
	Unit   string
	Help   string
}

// PrometheusName is the name a scrape shows: timers are exported in seconds
// with `_ns` replaced by `_seconds` (as a summary, or a histogram with
// `use_histogram_timing`).
func (m Metric) PrometheusName() string {
	if m.Type == Timer {
		return strings.TrimSuffix(m.Name, "_ns") + "_seconds"
	}
	return m.Name
}

// PrometheusType is the metric's type in the Prometheus exposition format.
func (m Metric) PrometheusType() string {
	if m.Type == Timer {
		return "summary"
	}
	return string(m.Type)
}

// Input lists the metrics of the kinesis input, checkpointing included.
var Input = []Metric{
	{Name: "kinesis_input_records_total", Type: Counter, Labels: []string{"stream"}, Unit: "records",
		Help: "User records delivered to the pipeline, after KPL de-aggregation."},
	{Name: "kinesis_input_records_dropped_total", Type: Counter, Labels: []string{"stream", "reason"}, Unit: "records",
		Help: "User records read but not delivered, by reason. `outside_hash_range`: a stray KPL aggregate copy outside its shard's hash key range, dropped whole as KCL drops it."},
	{Name: "kinesis_input_bytes_total", Type: Counter, Labels: []string{"stream"}, Unit: "bytes",
		Help: "Bytes of record data delivered to the pipeline."},
	{Name: "kinesis_input_millis_behind_latest", Type: Gauge, Labels: []string{"stream", "shard"}, Unit: "milliseconds",
		Help: "How far the last GetRecords response of a shard was behind the tip of the stream (Kinesis' MillisBehindLatest). 0 is caught up. While a record the pipeline failed waits to be processed, it is at least that record's age by its arrival in Kinesis, and grows while the shard waits (a poison record without a dead letter). Set by the instance reading the shard; when the shard leaves an instance (hand-off, lost lease, shard end) that instance's series drops to 0, so max by (stream, shard) over the instances is the shard's lag. An instance killed without a stop leaves its last value until Prometheus marks its series stale."},
	{Name: "kinesis_input_shards_owned", Type: Gauge, Labels: []string{"stream"}, Unit: "shards",
		Help: "Shards this instance holds a lease on and reads."},
	{Name: "kinesis_input_shards_unowned", Type: Gauge, Labels: []string{"stream"}, Unit: "shards",
		Help: "Shards ready to be read that nobody reads, as this instance sees them. Briefly above 0 at start-up and after a failover; lasting above 0 means records wait unread."},
	{Name: "kinesis_input_streams", Type: Gauge, Unit: "streams",
		Help: "Streams this instance reads: those `streams` names and those its patterns found."},
	{Name: "kinesis_input_throttled_total", Type: Counter, Labels: []string{"stream"}, Unit: "requests",
		Help: "Kinesis read calls refused for capacity (ProvisionedThroughputExceeded, LimitExceeded, KMS throttling) and retried after a backoff."},
	{Name: "kinesis_input_iterator_expired_total", Type: Counter, Labels: []string{"stream"}, Unit: "iterators",
		Help: "Shard iterators that expired (older than five minutes) and were renewed after the last delivered record."},
	{Name: "kinesis_input_leases_taken_total", Type: Counter, Labels: []string{"stream"}, Unit: "leases",
		Help: "Shard leases this instance acquired."},
	{Name: "kinesis_input_leases_lost_total", Type: Counter, Labels: []string{"stream"}, Unit: "leases",
		Help: "Shard leases this instance lost without handing them over; reading that shard stopped at once."},
	{Name: "kinesis_input_buffered_bytes", Type: Gauge, Unit: "bytes",
		Help: "Bytes of records the input holds against `max_buffered_bytes`, from fetch to acknowledgement; at `kinesis_input_max_buffered_bytes`, shards wait to fetch."},
	{Name: "kinesis_input_max_buffered_bytes", Type: Gauge, Unit: "bytes",
		Help: "The input's byte budget, `max_buffered_bytes` (absent when the bound is off)."},
	{Name: "kinesis_input_shards_waiting_for_buffer", Type: Gauge, Unit: "shards",
		Help: "Shards waiting for room in the input's byte budget before they fetch again. Above 0 for long means the pipeline acknowledges more slowly than the streams deliver: the shards fall behind (see `kinesis_input_millis_behind_latest`), and a warning is logged once they waited longer than `lag_warn_threshold`."},
	{Name: "kinesis_input_redelivered_total", Type: Counter, Labels: []string{"stream", "shard", "cause"}, Unit: "records",
		Help: "User records handed to the pipeline marked `kinesis_redelivered: true`, by `cause`: `nack` (again after the pipeline failed them) or `mark` (an earlier owner, or this instance before Redis forgot the group, may have delivered them). `nack` rising on one shard: a poison record or an output that is down; `mark` rises after failovers and hand-offs."},
	{Name: "kinesis_input_dead_lettered_total", Type: Counter, Labels: []string{"stream", "shard", "reason"}, Unit: "records",
		Help: "User records written to `redelivery.dead_letter`, and so done for the checkpoint, by reason: `max_attempts` or `max_record_age`. Each is logged at ERROR."},
	{Name: "kinesis_input_dead_letter_errors_total", Type: Counter, Labels: []string{"stream", "shard"}, Unit: "writes",
		Help: "Writes to `redelivery.dead_letter` that failed; the shard waits and retries, skipping nothing."},
	{Name: "kinesis_input_redelivery_oldest_seconds", Type: Gauge, Labels: []string{"stream", "shard"}, Unit: "seconds",
		Help: "How long the oldest record of a shard waiting for redelivery has waited since its first delivery; 0 when none waits, and 0 on an instance that stopped reading the shard: take max by (stream, shard). Climbing without end: a poison record or an output that is down."},
	{Name: "kinesis_checkpoint_commits_total", Type: Counter, Labels: []string{"stream"}, Unit: "commits",
		Help: "Checkpoints written to Redis."},
	{Name: "kinesis_checkpoint_errors_total", Type: Counter, Labels: []string{"stream"}, Unit: "errors",
		Help: "Checkpoint writes that failed: Redis did not answer, or the lease had moved (fenced)."},
	{Name: "kinesis_checkpoint_commit_latency_ns", Type: Timer, Labels: []string{"stream"}, Unit: "seconds",
		Help: "Duration of each checkpoint write to Redis, replica acknowledgement included; past the lease period it costs leases."},
}

// Output lists the metrics of the kinesis output.
var Output = []Metric{
	{Name: "kinesis_output_records_total", Type: Counter, Labels: []string{"stream"}, Unit: "records",
		Help: "Records Kinesis accepted."},
	{Name: "kinesis_output_bytes_total", Type: Counter, Labels: []string{"stream"}, Unit: "bytes",
		Help: "Bytes of data and partition keys of the records Kinesis accepted."},
	{Name: "kinesis_output_retries_total", Type: Counter, Labels: []string{"stream", "code"}, Unit: "records",
		Help: "Records sent again after Kinesis refused them, by Kinesis error code (ProvisionedThroughputExceededException is throttling)."},
	{Name: "kinesis_output_failed_total", Type: Counter, Labels: []string{"stream", "reason"}, Unit: "messages",
		Help: "Messages that failed for good and were returned to the pipeline as errors, by reason. `invalid`: never writable (empty or too long partition key, bad explicit hash key, too large, an interpolation failed). `refused`: Kinesis refused the record until the retry budget ran out. `earlier_failed`: ordered output, not sent because an earlier message with its partition key failed. `canceled`: the write was cancelled (shutdown) before Kinesis accepted it. `request_failed`: the PutRecords call itself failed after its retries (e.g. access denied, stream missing)."},
	{Name: "kinesis_output_put_latency_ns", Type: Timer, Labels: []string{"stream"}, Unit: "seconds",
		Help: "Duration of each PutRecords call, retries of a call counted separately."},
	{Name: "kinesis_output_null_partition_keys_total", Type: Counter, Labels: []string{"stream"}, Unit: "messages",
		Help: "Messages written with the partition key `null`: the `partition_key` interpolation found no value (`${! json(\"user_id\") }` on a message without user_id gives the text null), so they all land on one shard under one key. The first such batch of an output logs a warning."},
	{Name: "kinesis_output_records_key_waited_total", Type: Counter, Labels: []string{"stream"}, Unit: "records",
		Help: "Records of an ordered output that waited for an earlier round trip of their partition key: their key was already in their batch's first request, or in an earlier batch still being written. Near the rate of kinesis_output_records_total, the output is bound by its hot keys (one record, or one aggregated record, per key per round trip): see aggregation.enabled and preserve_order."},
}

// Help returns the description of the metric a Prometheus name belongs to
// (timers by their `_seconds` name), or false.
func Help(prometheusName string) (string, bool) {
	for _, list := range [][]Metric{Input, Output} {
		for _, m := range list {
			if m.PrometheusName() == prometheusName {
				return m.Help, true
			}
		}
	}
	return "", false
}
