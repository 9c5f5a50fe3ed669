package output

import (
	"context"
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
// bookkeeping. The SDK's serialization is the same with or without it.
type nopKinesis struct{ *fakeKinesis }

func (nopKinesis) PutRecords(_ context.Context, in *kinesis.PutRecordsInput, _ ...func(*kinesis.Options)) (*kinesis.PutRecordsOutput, error) {
	out := &kinesis.PutRecordsOutput{Records: make([]types.PutRecordsResultEntry, len(in.Records))}
	for i := range out.Records {
		out.Records[i].SequenceNumber = aws.String("1")
	}
	return out, nil
}

func BenchmarkWriteBatch(b *testing.B) {
	c, err := spec().ParseYAML("stream: s\npartition_key: '${! batch_index() }'", nil)
	require.NoError(b, err)
	oc, err := outputConfigFromParsed(c)
	require.NoError(b, err)
	o, err := newOutputFromConfig(oc, service.MockResources())
	require.NoError(b, err)
	o.newClient = func(context.Context) (kinesisAPI, string, error) { return nopKinesis{&fakeKinesis{}}, "eu-west-1", nil }
	require.NoError(b, o.Connect(b.Context()))

	data := []byte(strings.Repeat("x", 200))
	b.ReportAllocs()
	for b.Loop() {
		batch := make(service.MessageBatch, 500)
		for i := range batch {
			batch[i] = service.NewMessage(data)
		}
		if err := o.WriteBatch(b.Context(), batch); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*500), "ns/record")
}
