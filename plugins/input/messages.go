package input

import (
	"strconv"
	"time"

	"github.com/redpanda-data/benthos/v4/public/service"

	"github.com/connect-kinesis/connect-kinesis/internal/consumer"
)

// Boxed once: metadata is stored as `any`, and boxing a string allocates.
var firstAttempt, markTrue any = "1", "true"

// messages turns a consumer batch into Benthos messages with their
// metadata.
func messages(b *consumer.Batch) service.MessageBatch {
	batch := make(service.MessageBatch, len(b.Records))
	// Values shared by the messages of a batch are boxed once: metadata is
	// stored as `any`, and boxing a string allocates.
	var stream, shard, behind any = b.Stream, b.Shard, strconv.FormatInt(b.MillisBehind, 10)
	// Records of one response mostly share their arrival millisecond (and
	// sub-records their aggregate's), so the formatted time is reused.
	var lastArrival time.Time
	var arrival any
	// The user records of one KPL aggregate share its sequence number and
	// often a partition key (from the aggregate's key table), so within a
	// run of aggregated records an unchanged value keeps its box. Plain
	// records each have their own and are boxed without comparing.
	var key, seq any
	var lastKey, lastSeq string
	prevAggregated := false
	for i, r := range b.Records {
		if i == 0 || !r.Arrival.Equal(lastArrival) {
			lastArrival, arrival = r.Arrival, r.Arrival.UTC().Format(time.RFC3339Nano)
		}
		run := r.Aggregated && prevAggregated
		if !run || r.PartitionKey != lastKey {
			key = r.PartitionKey
		}
		if !run || r.Sequence != lastSeq {
			seq = r.Sequence
		}
		prevAggregated, lastKey, lastSeq = r.Aggregated, r.PartitionKey, r.Sequence
		m := service.NewMessage(r.Data)
		m.MetaSetMut(MetaStream, stream)
		m.MetaSetMut(MetaShard, shard)
		m.MetaSetMut(MetaPartitionKey, key)
		m.MetaSetMut(MetaSequenceNumber, seq)
		if r.Aggregated {
			m.MetaSetMut(MetaSubSequence, strconv.FormatInt(r.SubSequence, 10))
		}
		m.MetaSetMut(MetaArrival, arrival)
		m.MetaSetMut(MetaMillisBehind, behind)
		if n := b.Attempt(i); n == 1 {
			m.MetaSetMut(MetaDeliveryAttempt, firstAttempt)
		} else {
			m.MetaSetMut(MetaDeliveryAttempt, strconv.Itoa(n))
		}
		// Only a marked record carries the key: a ninth metadata entry
		// costs every message of a KPL aggregate a larger map.
		if b.Redelivered(i) {
			m.MetaSetMut(MetaRedelivered, markTrue)
		}
		batch[i] = m
	}
	return batch
}
