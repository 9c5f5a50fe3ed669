package consumertest

import (
	"context"
	"fmt"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/kinesis"
	"github.com/aws/aws-sdk-go-v2/service/kinesis/types"
)

// storeSizes is how many entries the store holds per key.
func (s *Store) Sizes() (ckpt, closed, leases, progress int) {
	s.Mu.Lock()
	defer s.Mu.Unlock()
	return len(s.Ckpt), len(s.Closed), len(s.LeaseMap), len(s.Progress)
}

// Deregister removes a consumer, as `aws kinesis deregister-stream-consumer`
// or a deleted stream does.
func (f *Consumers) Deregister(arn string) {
	f.Mu.Lock()
	defer f.Mu.Unlock()
	delete(f.ByARN, arn)
}

func (f *Consumers) DescribeStreamConsumer(_ context.Context, in *kinesis.DescribeStreamConsumerInput, _ ...func(*kinesis.Options)) (*kinesis.DescribeStreamConsumerOutput, error) {
	f.Mu.Lock()
	defer f.Mu.Unlock()
	for arn, name := range f.ByARN {
		if arn == aws.ToString(in.ConsumerARN) || (in.ConsumerARN == nil && name == aws.ToString(in.ConsumerName)) {
			return &kinesis.DescribeStreamConsumerOutput{ConsumerDescription: &types.ConsumerDescription{
				ConsumerARN: aws.String(arn), ConsumerName: aws.String(name), ConsumerStatus: types.ConsumerStatusActive, StreamARN: aws.String(StreamARN),
			}}, nil
		}
	}
	return nil, NotFound("consumer")
}

func (f *Consumers) RegisterStreamConsumer(_ context.Context, in *kinesis.RegisterStreamConsumerInput, _ ...func(*kinesis.Options)) (*kinesis.RegisterStreamConsumerOutput, error) {
	f.Mu.Lock()
	defer f.Mu.Unlock()
	if f.NoStream {
		return nil, NotFound("stream")
	}
	f.Registered++
	arn := fmt.Sprintf("%s/consumer/%s:%d", StreamARN, aws.ToString(in.ConsumerName), 100+f.Registered)
	f.ByARN[arn] = aws.ToString(in.ConsumerName)
	return &kinesis.RegisterStreamConsumerOutput{}, nil
}

func (f *Consumers) Registrations() int {
	f.Mu.Lock()
	defer f.Mu.Unlock()
	return f.Registered
}
