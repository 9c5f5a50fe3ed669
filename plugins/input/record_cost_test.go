package input

import (
	"bytes"
	"fmt"
	"runtime"
	"testing"
	"time"

	"github.com/redpanda-data/benthos/v4/public/service"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/connect-kinesis/connect-kinesis/internal/consumer"
	"github.com/connect-kinesis/connect-kinesis/internal/consumer/budget"
	"github.com/connect-kinesis/connect-kinesis/internal/kpl"
)

// heldRecords builds, from the Kinesis records' data as GetRecords gives
// it (one slice per Kinesis record), what the input holds for them until
// the pipeline acks: the consumer's user records (KPL aggregates split as
// the consumer splits them: each user record's data shares its
// aggregate's bytes), the Benthos messages made of them, and the indexer
// ReadBatch keeps to read per-message errors.
func heldRecords(raw [][]byte, deaggregate bool) (*consumer.Batch, service.MessageBatch, *service.Indexer) {
	var recs []consumer.Record
	arrival := time.Date(2026, 12, 2, 12, 0, 0, 0, time.UTC)
	for i, data := range raw {
		seq := fmt.Sprintf("49590338271490256608559692538361571095921575989136%06d", i)
		if deaggregate {
			subs, err := kpl.Decode(data)
			if err != nil {
				panic(err)
			}
			for j, s := range subs {
				recs = append(recs, consumer.Record{PartitionKey: s.PartitionKey, Data: s.Data, Sequence: seq, SubSequence: int64(j), Aggregated: true, Arrival: arrival})
			}
			continue
		}
		recs = append(recs, consumer.Record{PartitionKey: fmt.Sprintf("k-%d", i), Data: data, Sequence: seq, Arrival: arrival})
	}
	b := &consumer.Batch{Stream: "orders", Shard: "shardId-000000000001", Records: recs, MillisBehind: 1234}
	msgs := messages(b)
	// ReadBatch indexes the messages and keeps the indexer until the ack.
	return b, msgs, msgs.Index()
}

// heapOf is the live heap that make's result holds, measured after
// collections.
func heapOf(make func() any) (held int64, kept any) {
	var before, after runtime.MemStats
	runtime.GC()
	runtime.GC()
	runtime.ReadMemStats(&before)
	kept = make()
	runtime.GC()
	runtime.GC()
	runtime.ReadMemStats(&after)
	return int64(after.HeapAlloc) - int64(before.HeapAlloc), kept
}

// The byte budget charges each user record its data, key and sequence
// number plus a fixed overhead. Here the whole of what the input holds for
// a GetRecords answer (the answer's record data, the consumer's records,
// the Benthos messages with their metadata) is measured on the heap and
// compared with the charge: a charge below it lets the process hold more
// than max_buffered_bytes says, most with small user records (KPL
// aggregates of records of a few hundred bytes).
func TestBudgetChargesWhatARecordHolds(t *testing.T) {
	for _, c := range []struct {
		name        string
		records     int // Kinesis records in the answer
		users, size int // user records per aggregate (0: plain records) and their data's size
	}{
		{"KPL aggregates of 200 user records of 250 B", 40, 200, 250},
		{"KPL aggregates of 20 user records of 4 KB", 40, 20, 4000},
		{"plain records of 200 B", 5000, 0, 200},
		{"plain records of 900 KB", 8, 0, 900_000},
	} {
		t.Run(c.name, func(t *testing.T) {
			held, kept := heapOf(func() any {
				raw := make([][]byte, c.records)
				for i := range raw {
					if c.users == 0 {
						raw[i] = bytes.Repeat([]byte{'x'}, c.size)
						continue
					}
					subs := make([]kpl.Record, c.users)
					for j := range subs {
						subs[j] = kpl.Record{PartitionKey: fmt.Sprintf("k%d-%d", i, j), ExplicitHashKey: "170141183460469231731687303715884105728", Data: bytes.Repeat([]byte{'y'}, c.size)}
					}
					raw[i] = kpl.Encode(subs)
				}
				b, msgs, idx := heldRecords(raw, c.users > 0)
				return []any{raw, b, msgs, idx}
			})
			b := kept.([]any)[1].(*consumer.Batch)
			var charged int64
			for i := range b.Records {
				charged += budget.Cost(&b.Records[i])
			}
			runtime.KeepAlive(kept)
			n := int64(len(b.Records))
			require.Positive(t, held)
			t.Logf("%d user records: held %d B (%d per record), charged %d B (%d per record)", n, held, held/n, charged, charged/n)
			// A large record's allocation is rounded up to the heap's 8 KiB
			// pages: 0.1% of a record of 900 KB, left uncharged.
			assert.GreaterOrEqual(t, charged, held-held/100, "the budget charges at least what the input holds")
			assert.LessOrEqual(t, charged, held*3/2+n*64, "and not much more: a budget charged far above what is held holds fewer records than it could")
		})
	}
}
