package source

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/kinesis/types"
	"github.com/connect-kinesis/connect-kinesis/internal/consumer/consumertest"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// A consumer deregistered by hand (or deleted with its stream) refuses
// every subscription with ResourceNotFound: the source registers it again
// and reads on through the new one, from the last delivered record.
func TestSubscriptionRegistersAGoneConsumerAgain(t *testing.T) {
	t.Parallel()
	consumers := consumertest.NewConsumers(consumertest.ConsumerARN)
	f := &fakeSubscriptions{answers: []func() (EventStream, error){
		stream(consumertest.NewStream([]types.SubscribeToShardEvent{event("2", "1", "2")}, true, nil)),
		func() (EventStream, error) { return nil, consumertest.NotFound("consumer") },
		stream(consumertest.NewStream([]types.SubscribeToShardEvent{event("3", "3")}, false, nil)),
	}}
	s := newTestSubscriptionWith(f, consumers, Start{IterType: types.ShardIteratorTypeTrimHorizon})
	defer s.Close()
	seqs, _ := nextSeqs(t, s, 1)
	require.Equal(t, []string{"1", "2"}, seqs)
	consumers.Deregister(consumertest.ConsumerARN)

	ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
	defer cancel()
	b, err := s.Next(ctx)
	require.NoError(t, err, "the source gave up instead of registering the consumer again")
	require.Len(t, b.Records, 1)
	assert.Equal(t, "3", aws.ToString(b.Records[0].SequenceNumber))
	assert.Equal(t, 1, consumers.Registrations(), "registered once")
	f.mu.Lock()
	defer f.mu.Unlock()
	require.Len(t, f.arns, 3)
	assert.Equal(t, consumertest.ConsumerARN, f.arns[1], "the refused subscription used the old consumer")
	assert.NotEqual(t, consumertest.ConsumerARN, f.arns[2], "the next one uses the new consumer")
	assert.Equal(t, "AFTER_SEQUENCE_NUMBER 2", string(f.starts[2].Type)+" "+aws.ToString(f.starts[2].SequenceNumber))
}

// After the stream was recreated the consumer is resolved again before the
// next subscription: another instance registered it already, so it is
// found, not registered twice.
func TestSubscriptionResolvesAStaleConsumer(t *testing.T) {
	t.Parallel()
	const renewed = consumertest.StreamARN + "/consumer/c:2"
	consumers := consumertest.NewConsumers(renewed) // the old one went with the old stream
	f := &fakeSubscriptions{answers: []func() (EventStream, error){
		stream(consumertest.NewStream([]types.SubscribeToShardEvent{event("1", "1")}, false, nil)),
	}}
	s := newTestSubscriptionWith(f, consumers, Start{IterType: types.ShardIteratorTypeTrimHorizon})
	defer s.Close()
	s.consumer.MarkStale()
	_, _ = nextSeqs(t, s, 1)
	assert.Equal(t, []string{renewed}, f.arns)
	assert.Zero(t, consumers.Registrations())
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
			consumers := consumertest.NewConsumers(consumertest.ConsumerARN)
			if tc.consumerGone {
				consumers.Deregister(consumertest.ConsumerARN)
				consumers.NoStream = true
			}
			f := &fakeSubscriptions{}
			for range 100 {
				f.answers = append(f.answers, func() (EventStream, error) { return nil, consumertest.NotFound("shard") })
			}
			s := newTestSubscriptionWith(f, consumers, After("1"))
			defer s.Close()
			ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
			defer cancel()
			_, err := s.Next(ctx)
			require.Error(t, err)
			assert.True(t, errors.Is(err, ErrShardNotFound), "want ErrShardNotFound, got %v", err)
		})
	}
}
