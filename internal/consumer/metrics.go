package consumer

import (
	"crypto/rand"
	"encoding/hex"

	"github.com/redpanda-data/benthos/v4/public/service"
)

// Metric names, as docs/components lists them for users.
const (
	MetricRecords         = "kinesis_input_records_total"
	MetricBytes           = "kinesis_input_bytes_total"
	MetricMillisBehind    = "kinesis_input_millis_behind_latest"
	MetricShardsOwned     = "kinesis_input_shards_owned"
	MetricShardsUnowned   = "kinesis_input_shards_unowned"
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
)

// metrics is nil-safe: every Benthos metric is a no-op on a nil receiver.
type metrics struct {
	records, bytes, throttled, expired, taken, lost *service.MetricCounter
	dropped                                         *service.MetricCounter
	behind, owned, unowned                          *service.MetricGauge
	buffered, budget, waiting                       *service.MetricGauge
}

func newMetrics(m *service.Metrics) *metrics {
	return &metrics{
		records:   m.NewCounter(MetricRecords, "stream"),
		bytes:     m.NewCounter(MetricBytes, "stream"),
		throttled: m.NewCounter(MetricThrottled, "stream"),
		expired:   m.NewCounter(MetricIteratorExpired, "stream"),
		taken:     m.NewCounter(MetricLeasesTaken, "stream"),
		lost:      m.NewCounter(MetricLeasesLost, "stream"),
		dropped:   m.NewCounter(MetricRecordsDropped, "stream", "reason"),
		behind:    m.NewGauge(MetricMillisBehind, "stream", "shard"),
		owned:     m.NewGauge(MetricShardsOwned, "stream"),
		unowned:   m.NewGauge(MetricShardsUnowned, "stream"),
		buffered:  m.NewGauge(MetricBufferedBytes),
		budget:    m.NewGauge(MetricMaxBufferedBytes),
		waiting:   m.NewGauge(MetricShardsWaitingForBuffer),
	}
}

// reportUnowned sets kinesis_input_shards_unowned: the shards ready to be
// read that nobody reads as this instance sees them after a balancing
// round (no reader here and no live lease of another instance), so that an
// alert fires while a shard has no reader.
func (co *coordinator) reportUnowned(ready []string, leases map[string]LeaseState) {
	n := 0
	for _, id := range ready {
		if co.readers[id] != nil {
			continue
		}
		if ls, held := leases[id]; held && !ls.Expired && ls.Owner != "" && ls.Owner != co.c.owner {
			continue
		}
		n++
	}
	co.c.metrics.unowned.Set(int64(n), co.streamName)
}

func randomSuffix() string {
	b := make([]byte, 4)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}
