package producer

import (
	"context"
	"fmt"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/kinesis"
	"github.com/aws/aws-sdk-go-v2/service/kinesis/types"
)

// instantAPI accepts every record at once on the shard its hash key falls
// in, so a benchmark of Write measures the producer's own work.
type instantAPI struct{ shards *ShardMap }

func (a instantAPI) ListShards(context.Context, *kinesis.ListShardsInput, ...func(*kinesis.Options)) (*kinesis.ListShardsOutput, error) {
	return &kinesis.ListShardsOutput{}, nil
}

func (a instantAPI) PutRecords(_ context.Context, in *kinesis.PutRecordsInput, _ ...func(*kinesis.Options)) (*kinesis.PutRecordsOutput, error) {
	out := &kinesis.PutRecordsOutput{Records: make([]types.PutRecordsResultEntry, len(in.Records))}
	for i, e := range in.Records {
		shard := a.shards.ShardFor(Entry{PartitionKey: aws.ToString(e.PartitionKey), ExplicitHashKey: aws.ToString(e.ExplicitHashKey)})
		out.Records[i] = types.PutRecordsResultEntry{SequenceNumber: aws.String("1"), ShardId: aws.String(shard)}
	}
	return out, nil
}

// BenchmarkOrderedShardSizedWrite times one write of a batch sized by the
// rule of docs/performance.md (500 records per shard, 64 shards) by an
// ordered output that writes one batch at a time: everything the producer
// does before and after its requests' round trip, which the round trip
// cannot hide. Run with -cpu 1,2 to see how much of it spreads over cores.
func BenchmarkOrderedShardSizedWrite(b *testing.B) {
	const shards = 64
	for _, agg := range []bool{false, true} {
		b.Run(fmt.Sprintf("aggregated=%t", agg), func(b *testing.B) {
			m, err := NewShardMap(testShards(shards))
			if err != nil {
				b.Fatal(err)
			}
			p := newTestProducer(instantAPI{shards: m}, func(c *Config) {
				c.Ordered, c.SingleWriter, c.MaxInFlight = true, true, 64
				c.Aggregation.Enabled = agg
				c.Aggregation.MaxRecords, c.Aggregation.MaxBytes = 4294967295, 51200
			})
			p.SetShardMap(m)
			batch := keyedEntries(0, 500*shards, 100000)
			for i := range batch {
				batch[i].Data = make([]byte, 200)
			}
			b.ReportAllocs()
			b.ResetTimer()
			for b.Loop() {
				if errs := p.Write(b.Context(), batch); errs != nil {
					b.Fatal(errs)
				}
			}
			b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*len(batch)), "ns/record")
		})
	}
}
