package source

import (
	"context"
	"errors"
	"fmt"
	"sync"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/kinesis"
	"github.com/aws/aws-sdk-go-v2/service/kinesis/types"
	"github.com/redpanda-data/benthos/v4/public/service"

	"github.com/connect-kinesis/connect-kinesis/internal/consumer"
	"github.com/connect-kinesis/connect-kinesis/internal/kinesisx"
)

// StreamConsumer is the stream consumer the readers of one stream subscribe
// through with enhanced fan-out. Its ARN is resolved at start
// (EnsureStreamConsumer) and again when it may have changed: the stream
// was deleted and created again (deleting a stream deletes its consumers),
// or a subscription was refused because the consumer is gone (deregistered
// by hand). A consumer given by name is then found or registered anew; one
// given by ARN cannot be, and reading waits, with an error, until it exists
// again. One resolution runs at a time; readers that find the ARN stale
// meanwhile wait for it instead of registering again.
type StreamConsumer struct {
	api       StreamConsumerAPI
	streamARN string
	name      string // the consumer_name, or "" when consumer_arn is set
	given     string // the consumer_arn, or ""
	bo        kinesisx.Backoff
	log       *service.Logger

	turn  chan struct{} // held by the one resolution running
	mu    sync.Mutex
	arn   string
	stale bool
}

// errConsumerGone is what a subscription refused for a consumer that no
// longer exists is retried on: the next attempt resolves the consumer.
var errConsumerGone = errors.New("the stream consumer no longer exists")

func NewStreamConsumer(api StreamConsumerAPI, streamARN string, efo consumer.EnhancedFanOut, bo kinesisx.Backoff, log *service.Logger) *StreamConsumer {
	return &StreamConsumer{
		api: api, streamARN: streamARN, name: efo.ConsumerName, given: efo.ConsumerARN,
		bo: bo, log: log, turn: make(chan struct{}, 1), stale: true,
	}
}

// current returns the consumer's ARN, resolving it first when it is stale.
func (sc *StreamConsumer) current(ctx context.Context) (string, error) {
	sc.mu.Lock()
	arn, stale := sc.arn, sc.stale
	sc.mu.Unlock()
	if !stale {
		return arn, nil
	}
	return sc.Resolve(ctx)
}

// MarkStale makes the next subscription resolve the consumer again: the
// stream was recreated.
func (sc *StreamConsumer) MarkStale() {
	sc.mu.Lock()
	defer sc.mu.Unlock()
	sc.stale = true
}

// Resolve finds (or registers) the consumer and keeps its ARN. A
// ResourceNotFound in the error means the stream does not exist.
func (sc *StreamConsumer) Resolve(ctx context.Context) (string, error) {
	select {
	case sc.turn <- struct{}{}:
	case <-ctx.Done():
		return "", ctx.Err()
	}
	defer func() { <-sc.turn }()
	sc.mu.Lock()
	old, stale := sc.arn, sc.stale
	sc.mu.Unlock()
	if !stale {
		return old, nil // resolved while this reader waited its turn
	}
	arn, err := EnsureStreamConsumer(ctx, sc.api, sc.streamARN, sc.name, sc.given, sc.bo)
	if err != nil {
		if sc.given != "" && kinesisx.ErrorCode(err) == kinesisx.CodeResourceNotFound {
			// Not wrapped: the stream is not what is missing.
			return "", fmt.Errorf("field enhanced_fan_out.consumer_arn: stream consumer %s no longer exists (deregistered, or its stream deleted); register it again and set its new ARN, or set enhanced_fan_out.consumer_name instead so the input registers it: %s", sc.given, err.Error())
		}
		return "", err
	}
	sc.mu.Lock()
	sc.arn, sc.stale = arn, false
	sc.mu.Unlock()
	if old != "" && arn != old {
		sc.log.Warnf("The stream consumer %s was gone (deregistered, or the stream was deleted and created again); reading through %s now", old, arn)
	}
	return arn, nil
}

// gone tells, after Kinesis answered a subscription through arn with
// ResourceNotFound, whether the consumer is what is missing: true (and the
// ARN stale) when it does not exist or is being deleted; false when it is
// there, so the shard or the stream is what Kinesis did not find.
func (sc *StreamConsumer) gone(ctx context.Context, arn string) (bool, error) {
	out, err := sc.api.DescribeStreamConsumer(ctx, &kinesis.DescribeStreamConsumerInput{ConsumerARN: aws.String(arn)})
	switch {
	case kinesisx.ErrorCode(err) == kinesisx.CodeResourceNotFound:
	case err != nil:
		return false, fmt.Errorf("describing stream consumer %s: %w", arn, err)
	case out.ConsumerDescription == nil || out.ConsumerDescription.ConsumerStatus != types.ConsumerStatusDeleting:
		return false, nil
	}
	sc.mu.Lock()
	if sc.arn == arn {
		sc.stale = true
	}
	sc.mu.Unlock()
	return true, nil
}
