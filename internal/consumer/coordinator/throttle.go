package coordinator

import (
	"context"

	"github.com/aws/aws-sdk-go-v2/service/kinesis"
	"github.com/connect-kinesis/connect-kinesis/internal/consumer"
)

// throttleCounting is the Kinesis client of one stream that counts every
// throttled call, first attempt or retry, in kinesis_input_throttled_total.
type throttleCounting struct {
	api      consumer.KinesisAPI
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

func (t throttleCounting) RegisterStreamConsumer(ctx context.Context, in *kinesis.RegisterStreamConsumerInput, opts ...func(*kinesis.Options)) (*kinesis.RegisterStreamConsumerOutput, error) {
	return observe(t, t.api.(consumer.FanOutAPI).RegisterStreamConsumer, ctx, in, opts)
}

func (t throttleCounting) DescribeStreamConsumer(ctx context.Context, in *kinesis.DescribeStreamConsumerInput, opts ...func(*kinesis.Options)) (*kinesis.DescribeStreamConsumerOutput, error) {
	return observe(t, t.api.(consumer.FanOutAPI).DescribeStreamConsumer, ctx, in, opts)
}

func (t throttleCounting) SubscribeToShard(ctx context.Context, in *kinesis.SubscribeToShardInput, opts ...func(*kinesis.Options)) (*kinesis.SubscribeToShardOutput, error) {
	return observe(t, t.api.(consumer.FanOutAPI).SubscribeToShard, ctx, in, opts)
}
