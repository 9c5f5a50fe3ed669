package output

import (
	"context"
	"fmt"
	"math/big"
	"strings"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/kinesis"
	"github.com/aws/aws-sdk-go-v2/service/kinesis/types"
	"github.com/redpanda-data/benthos/v4/public/service"
	"github.com/stretchr/testify/require"
)

// nopKinesis accepts everything at once, so the benchmark measures the
// output's own work per batch: interpolation, validation, packing, retry
// bookkeeping. The SDK's serialization is the same with or without it. Its
// stream has four shards of equal ranges.
type nopKinesis struct{ *fakeKinesis }

func (nopKinesis) ListShards(context.Context, *kinesis.ListShardsInput, ...func(*kinesis.Options)) (*kinesis.ListShardsOutput, error) {
	const n = 4
	width := new(big.Int).Lsh(big.NewInt(1), 128)
	width.Div(width, big.NewInt(n))
	out := &kinesis.ListShardsOutput{}
	for i := range n {
		start := new(big.Int).Mul(width, big.NewInt(int64(i)))
		end := new(big.Int).Sub(new(big.Int).Add(start, width), big.NewInt(1))
		out.Shards = append(out.Shards, types.Shard{
			ShardId:      aws.String(fmt.Sprintf("shardId-%012d", i)),
			HashKeyRange: &types.HashKeyRange{StartingHashKey: aws.String(start.String()), EndingHashKey: aws.String(end.String())},
		})
	}
	return out, nil
}

func (nopKinesis) PutRecords(_ context.Context, in *kinesis.PutRecordsInput, _ ...func(*kinesis.Options)) (*kinesis.PutRecordsOutput, error) {
	out := &kinesis.PutRecordsOutput{Records: make([]types.PutRecordsResultEntry, len(in.Records))}
	for i := range out.Records {
		out.Records[i].SequenceNumber = aws.String("1")
	}
	return out, nil
}

// BenchmarkWriteBatch writes batches of 500 messages of 200 bytes, each with
// its own partition key, in every mode of the output, and with the key taken
// from metadata.
func BenchmarkWriteBatch(b *testing.B) {
	const byIndex = "partition_key: '${! batch_index() }'\n"
	for _, mode := range []struct{ name, fields string }{
		{"unordered", byIndex + "preserve_order: false"},
		{"ordered", byIndex + "preserve_order: true"},
		{"unordered aggregated", byIndex + "preserve_order: false\naggregation: {enabled: true}"},
		{"ordered aggregated", byIndex + "preserve_order: true\naggregation: {enabled: true}"},
		{"unordered meta key", "partition_key: '${! meta(\"key\") }'\npreserve_order: false"},
	} {
		b.Run(mode.name, func(b *testing.B) {
			c, err := spec().ParseYAML("stream: s\n"+mode.fields, nil)
			require.NoError(b, err)
			oc, err := outputConfigFromParsed(c)
			require.NoError(b, err)
			o, err := newOutputFromConfig(oc, service.MockResources())
			require.NoError(b, err)
			o.newClient = func(context.Context) (kinesisAPI, string, error) { return nopKinesis{&fakeKinesis{}}, "eu-west-1", nil }
			require.NoError(b, o.Connect(b.Context()))
			b.Cleanup(func() { _ = o.Close(context.Background()) })

			data := []byte(strings.Repeat("x", 200))
			keys := make([]any, 500)
			for i := range keys {
				keys[i] = fmt.Sprintf("key-%d", i)
			}
			b.ReportAllocs()
			for b.Loop() {
				batch := make(service.MessageBatch, 500)
				for i := range batch {
					batch[i] = service.NewMessage(data)
					batch[i].MetaSetMut("key", keys[i])
				}
				if err := o.WriteBatch(b.Context(), batch); err != nil {
					b.Fatal(err)
				}
			}
			b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*500), "ns/record")
		})
	}
}
