package consumer

import (
	"context"

	"github.com/aws/aws-sdk-go-v2/service/kinesis"
)

// KinesisAPI is the part of the Kinesis client the consumer calls.
type KinesisAPI interface {
	DescribeStreamSummary(ctx context.Context, in *kinesis.DescribeStreamSummaryInput, opts ...func(*kinesis.Options)) (*kinesis.DescribeStreamSummaryOutput, error)
	ListShards(ctx context.Context, in *kinesis.ListShardsInput, opts ...func(*kinesis.Options)) (*kinesis.ListShardsOutput, error)
	GetShardIterator(ctx context.Context, in *kinesis.GetShardIteratorInput, opts ...func(*kinesis.Options)) (*kinesis.GetShardIteratorOutput, error)
	GetRecords(ctx context.Context, in *kinesis.GetRecordsInput, opts ...func(*kinesis.Options)) (*kinesis.GetRecordsOutput, error)
}

// throttleCounting is the Kinesis client of one stream that counts every
// throttled call, first attempt or retry, in kinesis_input_throttled_total.
type throttleCounting struct {
	api      KinesisAPI
	observed func(err error)
}

func (t throttleCounting) DescribeStreamSummary(ctx context.Context, in *kinesis.DescribeStreamSummaryInput, opts ...func(*kinesis.Options)) (*kinesis.DescribeStreamSummaryOutput, error) {
	return observe(t, t.api.DescribeStreamSummary, ctx, in, opts)
}

func (t throttleCounting) ListShards(ctx context.Context, in *kinesis.ListShardsInput, opts ...func(*kinesis.Options)) (*kinesis.ListShardsOutput, error) {
	return observe(t, t.api.ListShards, ctx, in, opts)
}

func (t throttleCounting) GetShardIterator(ctx context.Context, in *kinesis.GetShardIteratorInput, opts ...func(*kinesis.Options)) (*kinesis.GetShardIteratorOutput, error) {
	return observe(t, t.api.GetShardIterator, ctx, in, opts)
}

func (t throttleCounting) GetRecords(ctx context.Context, in *kinesis.GetRecordsInput, opts ...func(*kinesis.Options)) (*kinesis.GetRecordsOutput, error) {
	return observe(t, t.api.GetRecords, ctx, in, opts)
}

// observe makes one call and shows its error to t.observed.
func observe[I, O any](t throttleCounting, call func(context.Context, I, ...func(*kinesis.Options)) (O, error), ctx context.Context, in I, opts []func(*kinesis.Options)) (O, error) {
	out, err := call(ctx, in, opts...)
	t.observed(err)
	return out, err
}
