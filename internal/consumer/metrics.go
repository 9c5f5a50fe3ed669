package consumer

import (
	"crypto/rand"
	"encoding/hex"

	"github.com/redpanda-data/benthos/v4/public/service"
)

// Metric names, as docs/components lists them for users.
const (
	MetricRecords       = "kinesis_input_records_total"
	MetricBytes         = "kinesis_input_bytes_total"
	MetricMillisBehind  = "kinesis_input_millis_behind_latest"
	MetricShardsOwned   = "kinesis_input_shards_owned"
	MetricShardsUnowned = "kinesis_input_shards_unowned"
	// MetricStreams is the number of streams the input reads: the named
	// ones and those its patterns found.
	MetricStreams         = "kinesis_input_streams"
	MetricThrottled       = "kinesis_input_throttled_total"
	MetricIteratorExpired = "kinesis_input_iterator_expired_total"
	MetricLeasesTaken     = "kinesis_input_leases_taken_total"
	MetricLeasesLost      = "kinesis_input_leases_lost_total"
	// MetricRecordsDropped counts user records not delivered, by reason:
	// only DropOutsideHashRange today (hashrange.go).
	MetricRecordsDropped = "kinesis_input_records_dropped_total"
	// MetricBufferedBytes is what the input holds of its byte budget:
	// room reserved for calls under way, records fetched and waiting, and
	// batches in the pipeline not yet acked.
	MetricBufferedBytes = "kinesis_input_buffered_bytes"
	// MetricMaxBufferedBytes is the budget itself (max_buffered_bytes).
	MetricMaxBufferedBytes = "kinesis_input_max_buffered_bytes"
	// MetricShardsWaitingForBuffer counts the shards that wait for room in
	// the budget before they fetch again.
	MetricShardsWaitingForBuffer = "kinesis_input_shards_waiting_for_buffer"
	// MetricRedelivered counts the records handed to the pipeline marked
	// kinesis_redelivered, by cause (RedeliveredNack, RedeliveredMark).
	MetricRedelivered = "kinesis_input_redelivered_total"
	// MetricDeadLettered counts records written to the dead letter, by
	// reason (DeadLetterMaxAttempts, DeadLetterMaxRecordAge).
	MetricDeadLettered = "kinesis_input_dead_lettered_total"
	// MetricDeadLetterErrors counts failed dead-letter writes (the shard
	// waits and retries).
	MetricDeadLetterErrors = "kinesis_input_dead_letter_errors_total"
	// MetricRedeliveryOldest is how long (seconds, since its first
	// delivery) the oldest nacked record of a shard has waited to be
	// processed; 0 when none waits.
	MetricRedeliveryOldest = "kinesis_input_redelivery_oldest_seconds"
)

// Metrics are the consumer's metrics, shared by its rooms. They are nil-safe: every Benthos metric is a no-op on a nil receiver.
type Metrics struct {
	Records, Bytes, Throttled, Expired, Taken, Lost *service.MetricCounter
	Dropped                                         *service.MetricCounter
	Behind, Owned, Unowned                          *service.MetricGauge
	Buffered, Budget, Waiting                       *service.MetricGauge
	// Streams is the number of streams read (no label).
	Streams *service.MetricGauge
	// Redelivered is by stream, shard and cause; DeadLetterErrors by
	// stream and shard, DeadLettered by stream, shard and reason;
	// RedeliveryOldest by stream and shard.
	Redelivered, DeadLettered, DeadLetterErrors *service.MetricCounter
	RedeliveryOldest                            *service.MetricGauge
}

// NewMetrics registers the consumer's metrics with m.
func NewMetrics(m *service.Metrics) *Metrics {
	return &Metrics{
		Records:   m.NewCounter(MetricRecords, "stream"),
		Bytes:     m.NewCounter(MetricBytes, "stream"),
		Throttled: m.NewCounter(MetricThrottled, "stream"),
		Expired:   m.NewCounter(MetricIteratorExpired, "stream"),
		Taken:     m.NewCounter(MetricLeasesTaken, "stream"),
		Lost:      m.NewCounter(MetricLeasesLost, "stream"),
		Dropped:   m.NewCounter(MetricRecordsDropped, "stream", "reason"),
		Behind:    m.NewGauge(MetricMillisBehind, "stream", "shard"),
		Owned:     m.NewGauge(MetricShardsOwned, "stream"),
		Unowned:   m.NewGauge(MetricShardsUnowned, "stream"),
		Buffered:  m.NewGauge(MetricBufferedBytes),
		Budget:    m.NewGauge(MetricMaxBufferedBytes),
		Waiting:   m.NewGauge(MetricShardsWaitingForBuffer),
		Streams:   m.NewGauge(MetricStreams),

		Redelivered:      m.NewCounter(MetricRedelivered, "stream", "shard", "cause"),
		DeadLettered:     m.NewCounter(MetricDeadLettered, "stream", "shard", "reason"),
		DeadLetterErrors: m.NewCounter(MetricDeadLetterErrors, "stream", "shard"),
		RedeliveryOldest: m.NewGauge(MetricRedeliveryOldest, "stream", "shard"),
	}
}

func randomSuffix() string {
	b := make([]byte, 4)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}
