package input

import (
	"fmt"
	"strconv"
	"testing"
	"time"

	"github.com/redpanda-data/benthos/v4/public/service"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/connect-kinesis/connect-kinesis/internal/consumer"
)

// naiveMessages is the plain way to set the metadata, kept as the baseline
// of BenchmarkMessages and as the reference of what messages must set:
// every value formatted and boxed per message.
func naiveMessages(b *consumer.Batch) service.MessageBatch {
	batch := make(service.MessageBatch, len(b.Records))
	for i, r := range b.Records {
		m := service.NewMessage(r.Data)
		m.MetaSet(MetaStream, b.Stream)
		m.MetaSet(MetaShard, b.Shard)
		m.MetaSet(MetaPartitionKey, r.PartitionKey)
		m.MetaSet(MetaSequenceNumber, r.Sequence)
		if r.Aggregated {
			m.MetaSet(MetaSubSequence, strconv.FormatInt(r.SubSequence, 10))
		}
		m.MetaSet(MetaArrival, r.Arrival.UTC().Format(time.RFC3339Nano))
		m.MetaSet(MetaMillisBehind, strconv.FormatInt(b.MillisBehind, 10))
		m.MetaSet(MetaDeliveryAttempt, strconv.Itoa(b.Attempt(i)))
		if b.Redelivered(i) {
			m.MetaSet(MetaRedelivered, "true")
		}
		batch[i] = m
	}
	return batch
}

// benchBatch is a GetRecords response's worth of records: n records of
// 200 bytes, ten per arrival millisecond; with aggregated, runs of 50 user
// records share a sequence number and cycle through 4 partition keys, as
// KPL aggregates do.
func benchBatch(n int, aggregated bool) *consumer.Batch {
	data := make([]byte, 200)
	start := time.Date(2024, 5, 1, 12, 0, 0, 0, time.FixedZone("CEST", 2*3600))
	recs := make([]consumer.Record, n)
	for i := range recs {
		recs[i] = consumer.Record{
			PartitionKey: fmt.Sprintf("key-%d", i),
			Data:         data,
			Sequence:     fmt.Sprintf("4959%040d", i),
			Arrival:      start.Add(time.Duration(i/10) * time.Millisecond),
		}
		if aggregated {
			recs[i].PartitionKey = fmt.Sprintf("key-%d", i%4)
			recs[i].Sequence = fmt.Sprintf("4959%040d", i/50)
			recs[i].SubSequence = int64(i % 50)
			recs[i].Aggregated = true
		}
	}
	return &consumer.Batch{Stream: "orders", Shard: "shardId-000000000001", Records: recs, MillisBehind: 1234}
}

func TestMessagesCarryEveryRecordsMetadata(t *testing.T) {
	for _, aggregated := range []bool{false, true} {
		t.Run(fmt.Sprintf("aggregated %t", aggregated), func(t *testing.T) {
			b := benchBatch(120, aggregated)
			got, want := messages(b), naiveMessages(b)
			require.Len(t, got, len(want))
			for i := range want {
				wantMeta, gotMeta := map[string]any{}, map[string]any{}
				require.NoError(t, want[i].MetaWalkMut(func(k string, v any) error { wantMeta[k] = v; return nil }))
				require.NoError(t, got[i].MetaWalkMut(func(k string, v any) error { gotMeta[k] = v; return nil }))
				assert.Equal(t, wantMeta, gotMeta, "record %d", i)
				data, err := got[i].AsBytes()
				require.NoError(t, err)
				assert.Equal(t, b.Records[i].Data, data)
			}
			arrival, _ := got[0].MetaGet(MetaArrival)
			assert.Equal(t, "2024-05-01T10:00:00Z", arrival, "RFC3339Nano in UTC")
			attempt, _ := got[0].MetaGet(MetaDeliveryAttempt)
			assert.Equal(t, "1", attempt, "a first delivery")
			_, marked := got[0].MetaGet(MetaRedelivered)
			assert.False(t, marked, "a record nobody delivered before carries no mark")
		})
	}
}

// A record an earlier owner may have delivered (at or below the take's
// redelivery mark), or one this instance delivers again after a failure,
// carries kinesis_redelivered; the attempt counts this instance's
// deliveries.
func TestMessagesMarkRedeliveries(t *testing.T) {
	for _, aggregated := range []bool{false, true} {
		t.Run(fmt.Sprintf("aggregated %t", aggregated), func(t *testing.T) {
			b := benchBatch(200, aggregated)
			// An earlier owner stored its mark at record 99 (inside an
			// aggregate: its sub-record).
			b.DeliveredBefore = b.Records[99].Position()
			b.Attempts = make([]int, len(b.Records))
			for i := range b.Attempts {
				b.Attempts[i] = 1
			}
			b.Attempts[150] = 3
			got := messages(b)
			for i, m := range got {
				mark, marked := m.MetaGet(MetaRedelivered)
				attempt, _ := m.MetaGet(MetaDeliveryAttempt)
				switch {
				case i <= 99:
					assert.Equal(t, "true", mark, "record %d, at or below the mark", i)
				case i == 150:
					assert.Equal(t, "true", mark, "record %d, delivered again after failures", i)
					assert.Equal(t, "3", attempt)
				default:
					assert.False(t, marked, "record %d, past the mark and on its first delivery", i)
				}
				if i != 150 {
					assert.Equal(t, "1", attempt, "record %d", i)
				}
			}
		})
	}
}

// BenchmarkMessages weighs the metadata levers of messages against the
// plain way: values shared by a batch boxed once (MetaSetMut), arrival
// times formatted once per millisecond, aggregate runs sharing their
// sequence and key.
func BenchmarkMessages(b *testing.B) {
	for _, aggregated := range []bool{false, true} {
		batch := benchBatch(10000, aggregated)
		for _, impl := range []struct {
			name string
			fn   func(*consumer.Batch) service.MessageBatch
		}{{"naive", naiveMessages}, {"messages", messages}} {
			b.Run(fmt.Sprintf("aggregated=%t/%s", aggregated, impl.name), func(b *testing.B) {
				b.ReportAllocs()
				for b.Loop() {
					impl.fn(batch)
				}
				b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*len(batch.Records)), "ns/record")
			})
		}
	}
}
