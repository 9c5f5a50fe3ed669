package consumer

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/kinesis"
	"github.com/aws/aws-sdk-go-v2/service/kinesis/types"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

const fakeStreamARN = fakeARNPrefix + "s"

// fakeConsumers is the stream-consumer half of a fake fan-out API: the
// consumers of stream s by ARN, all ACTIVE; registering adds one named
// after its ARN's count.
type fakeConsumers struct {
	mu         sync.Mutex
	byARN      map[string]string // ARN -> name
	registered int
	// noStream makes registering fail as for a deleted stream.
	noStream bool
}

func newFakeConsumers(arns ...string) *fakeConsumers {
	f := &fakeConsumers{byARN: map[string]string{}}
	for _, a := range arns {
		name, _, _ := strings.Cut(a[strings.LastIndex(a, "/")+1:], ":")
		f.byARN[a] = name
	}
	return f
}

// deregister removes a consumer, as `aws kinesis deregister-stream-consumer`
// or a deleted stream does.
func (f *fakeConsumers) deregister(arn string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	delete(f.byARN, arn)
}

func notFound(what string) error {
	return apiErr(400, &types.ResourceNotFoundException{Message: aws.String(what + " not found")})
}

func (f *fakeConsumers) DescribeStreamConsumer(_ context.Context, in *kinesis.DescribeStreamConsumerInput, _ ...func(*kinesis.Options)) (*kinesis.DescribeStreamConsumerOutput, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	for arn, name := range f.byARN {
		if arn == aws.ToString(in.ConsumerARN) || (in.ConsumerARN == nil && name == aws.ToString(in.ConsumerName)) {
			return &kinesis.DescribeStreamConsumerOutput{ConsumerDescription: &types.ConsumerDescription{
				ConsumerARN: aws.String(arn), ConsumerName: aws.String(name), ConsumerStatus: types.ConsumerStatusActive, StreamARN: aws.String(fakeStreamARN),
			}}, nil
		}
	}
	return nil, notFound("consumer")
}

func (f *fakeConsumers) RegisterStreamConsumer(_ context.Context, in *kinesis.RegisterStreamConsumerInput, _ ...func(*kinesis.Options)) (*kinesis.RegisterStreamConsumerOutput, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.noStream {
		return nil, notFound("stream")
	}
	f.registered++
	arn := fmt.Sprintf("%s/consumer/%s:%d", fakeStreamARN, aws.ToString(in.ConsumerName), 100+f.registered)
	f.byARN[arn] = aws.ToString(in.ConsumerName)
	return &kinesis.RegisterStreamConsumerOutput{}, nil
}

func (f *fakeConsumers) registrations() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.registered
}

// A consumer deregistered by hand (or deleted with its stream) refuses
// every subscription with ResourceNotFound: the source registers it again
// and reads on through the new one, from the last delivered record.
func TestSubscriptionRegistersAGoneConsumerAgain(t *testing.T) {
	t.Parallel()
	consumers := newFakeConsumers(testConsumerARN)
	f := &fakeSubscriptions{answers: []func() (eventStream, error){
		stream(newFakeStream([]types.SubscribeToShardEvent{event("2", "1", "2")}, true, nil)),
		func() (eventStream, error) { return nil, notFound("consumer") },
		stream(newFakeStream([]types.SubscribeToShardEvent{event("3", "3")}, false, nil)),
	}}
	s := newTestSubscriptionWith(f, consumers, startSpec{iterType: types.ShardIteratorTypeTrimHorizon})
	defer s.Close()
	seqs, _ := nextSeqs(t, s, 1)
	require.Equal(t, []string{"1", "2"}, seqs)
	consumers.deregister(testConsumerARN)

	ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
	defer cancel()
	b, err := s.Next(ctx)
	require.NoError(t, err, "the source gave up instead of registering the consumer again")
	require.Len(t, b.Records, 1)
	assert.Equal(t, "3", aws.ToString(b.Records[0].SequenceNumber))
	assert.Equal(t, 1, consumers.registrations(), "registered once")
	f.mu.Lock()
	defer f.mu.Unlock()
	require.Len(t, f.arns, 3)
	assert.Equal(t, testConsumerARN, f.arns[1], "the refused subscription used the old consumer")
	assert.NotEqual(t, testConsumerARN, f.arns[2], "the next one uses the new consumer")
	assert.Equal(t, "AFTER_SEQUENCE_NUMBER 2", string(f.starts[2].Type)+" "+aws.ToString(f.starts[2].SequenceNumber))
}

// After the stream was recreated the consumer is resolved again before the
// next subscription: another instance registered it already, so it is
// found, not registered twice.
func TestSubscriptionResolvesAStaleConsumer(t *testing.T) {
	t.Parallel()
	const renewed = fakeStreamARN + "/consumer/c:2"
	consumers := newFakeConsumers(renewed) // the old one went with the old stream
	f := &fakeSubscriptions{answers: []func() (eventStream, error){
		stream(newFakeStream([]types.SubscribeToShardEvent{event("1", "1")}, false, nil)),
	}}
	s := newTestSubscriptionWith(f, consumers, startSpec{iterType: types.ShardIteratorTypeTrimHorizon})
	defer s.Close()
	s.consumer.markStale()
	_, _ = nextSeqs(t, s, 1)
	assert.Equal(t, []string{renewed}, f.arns)
	assert.Zero(t, consumers.registrations())
}

// ResourceNotFound while the consumer exists means the shard (trimmed) or
// the stream (deleted) is gone: Next reports ErrShardNotFound, so the
// reader can tell which, instead of retrying for ever. So does a consumer
// that cannot be registered again because its stream is gone.
func TestSubscriptionReportsAMissingShard(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name         string
		consumerGone bool
	}{
		{"consumer exists", false},
		{"consumer and stream gone", true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			consumers := newFakeConsumers(testConsumerARN)
			if tc.consumerGone {
				consumers.deregister(testConsumerARN)
				consumers.noStream = true
			}
			f := &fakeSubscriptions{}
			for range 100 {
				f.answers = append(f.answers, func() (eventStream, error) { return nil, notFound("shard") })
			}
			s := newTestSubscriptionWith(f, consumers, after("1"))
			defer s.Close()
			ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
			defer cancel()
			_, err := s.Next(ctx)
			require.Error(t, err)
			assert.True(t, errors.Is(err, ErrShardNotFound), "want ErrShardNotFound, got %v", err)
		})
	}
}
