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
		Help: "How far the shard's last GetRecords answer was behind the stream's tip (MillisBehindLatest); while a failed record waits, at least that record's age. 0 on an instance that no longer reads the shard: take max by (stream, shard)."},
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
		Help: "Shards waiting for room in the byte budget before they fetch again. Above 0 for long: the pipeline acks more slowly than the streams deliver."},
	{Name: "kinesis_input_redelivered_total", Type: Counter, Labels: []string{"stream", "shard", "cause"}, Unit: "records",
		Help: "User records handed over marked `kinesis_redelivered: true`, by `cause`: `nack` (after the pipeline failed them) or `mark` (an earlier owner may have delivered them: failovers, hand-offs, a Redis that forgot)."},
	{Name: "kinesis_input_dead_lettered_total", Type: Counter, Labels: []string{"stream", "shard", "reason"}, Unit: "records",
		Help: "User records written to `redelivery.dead_letter`, and so done for the checkpoint, by reason: `max_attempts` or `max_record_age`. Each is logged at ERROR."},
	{Name: "kinesis_input_dead_letter_errors_total", Type: Counter, Labels: []string{"stream", "shard"}, Unit: "writes",
		Help: "Writes to `redelivery.dead_letter` that failed; the shard waits and retries, skipping nothing."},
	{Name: "kinesis_input_redelivery_oldest_seconds", Type: Gauge, Labels: []string{"stream", "shard"}, Unit: "seconds",
		Help: "How long the shard's oldest record waiting for redelivery has waited since its first delivery; 0 when none waits. Take max by (stream, shard)."},
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
		Help: "Messages that failed for good, returned to the pipeline as errors, by reason: `invalid` (never writable), `refused` (retries ran out), `earlier_failed` (ordered: an earlier message of its key failed), `canceled` (shutdown), `request_failed` (the call itself failed)."},
	{Name: "kinesis_output_put_latency_ns", Type: Timer, Labels: []string{"stream"}, Unit: "seconds",
		Help: "Duration of each PutRecords call, retries of a call counted separately."},
	{Name: "kinesis_output_null_partition_keys_total", Type: Counter, Labels: []string{"stream"}, Unit: "messages",
		Help: "Messages written with the partition key `null` (the `partition_key` interpolation found no value): they all land on one shard. The first such batch logs a warning."},
	{Name: "kinesis_output_records_key_waited_total", Type: Counter, Labels: []string{"stream"}, Unit: "records",
		Help: "Records of an ordered output that waited for an earlier round trip of their key. Near kinesis_output_records_total's rate: hot keys bind the output (see aggregation.enabled)."},
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
