package source

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/kinesis"
	"github.com/aws/aws-sdk-go-v2/service/kinesis/schemas"
	"github.com/aws/aws-sdk-go-v2/service/kinesis/types"
	smithyhttp "github.com/aws/smithy-go/transport/http"
	"github.com/aws/smithy-go/transport/http/protocol/awsjson"
	"github.com/failsafe-go/failsafe-go"

	"github.com/connect-kinesis/connect-kinesis/internal/kinesisx"
)

// consumerActiveTimeout bounds the wait for a stream consumer to become
// ACTIVE. Kinesis documents "a few seconds"; a minute leaves room.
const consumerActiveTimeout = time.Minute

// consumerPollInterval spaces DescribeStreamConsumer calls while a
// consumer is CREATING (Kinesis allows 20 per second per stream).
const consumerPollInterval = 500 * time.Millisecond

// errConsumerNotActive is what the wait for ACTIVE retries on.
var errConsumerNotActive = errors.New("stream consumer is not ACTIVE yet")

// StreamConsumerAPI is what finding or registering a stream consumer calls.
type StreamConsumerAPI interface {
	RegisterStreamConsumer(ctx context.Context, in *kinesis.RegisterStreamConsumerInput, opts ...func(*kinesis.Options)) (*kinesis.RegisterStreamConsumerOutput, error)
	DescribeStreamConsumer(ctx context.Context, in *kinesis.DescribeStreamConsumerInput, opts ...func(*kinesis.Options)) (*kinesis.DescribeStreamConsumerOutput, error)
}

// EnsureStreamConsumer returns the ARN of an ACTIVE stream consumer: the
// one named consumerARN, else the one of stream streamARN called name,
// registered first when there is none. Two instances starting at once may
// both register; the loser's ResourceInUse means the consumer exists, and
// it is described like any existing one. Failures are retried with the
// given backoff; the wait for ACTIVE is bounded by consumerActiveTimeout.
func EnsureStreamConsumer(ctx context.Context, api StreamConsumerAPI, streamARN, name, consumerARN string, bo kinesisx.Backoff) (string, error) {
	describe := &kinesis.DescribeStreamConsumerInput{}
	field := "enhanced_fan_out.consumer_name"
	if consumerARN != "" {
		describe.ConsumerARN = aws.String(consumerARN)
		field = "enhanced_fan_out.consumer_arn"
	} else {
		describe.StreamARN, describe.ConsumerName = aws.String(streamARN), aws.String(name)
	}
	bo.MaxElapsedTime = consumerActiveTimeout
	bo.InitialInterval = max(bo.InitialInterval, consumerPollInterval)
	bo.MaxInterval = max(bo.MaxInterval, bo.InitialInterval)
	policy := kinesisx.RetryBuilder[*types.ConsumerDescription](bo).
		HandleIf(func(_ *types.ConsumerDescription, err error) bool { return errors.Is(err, errConsumerNotActive) }).
		Build()
	registered := false
	desc, err := failsafe.With(policy).WithContext(ctx).Get(func() (*types.ConsumerDescription, error) {
		out, err := api.DescribeStreamConsumer(ctx, describe)
		if kinesisx.ErrorCode(err) == kinesisx.CodeResourceNotFound && consumerARN == "" && !registered {
			_, err = api.RegisterStreamConsumer(ctx, &kinesis.RegisterStreamConsumerInput{StreamARN: aws.String(streamARN), ConsumerName: aws.String(name)})
			if err == nil || kinesisx.ErrorCode(err) == kinesisx.CodeResourceInUse {
				registered = true
				return nil, errConsumerNotActive
			}
			return nil, fmt.Errorf("registering stream consumer %s: %w", name, err)
		}
		if kinesisx.ErrorCode(err) == kinesisx.CodeResourceNotFound && registered {
			// Registered, but not yet visible to Describe.
			return nil, errConsumerNotActive
		}
		if err != nil {
			return nil, err
		}
		d := out.ConsumerDescription
		if d.ConsumerStatus != types.ConsumerStatusActive {
			return d, errConsumerNotActive
		}
		return d, nil
	})
	switch {
	case errors.Is(err, errConsumerNotActive):
		return "", fmt.Errorf("field %s: stream consumer is not ACTIVE after %v (a consumer being deleted cannot be reused until it is gone)", field, consumerActiveTimeout)
	case kinesisx.ErrorCode(err) == kinesisx.CodeResourceNotFound:
		return "", fmt.Errorf("field %s: no such stream consumer: %w", field, err)
	case err != nil:
		return "", fmt.Errorf("finding stream consumer for %s: %w", field, err)
	}
	arn := aws.ToString(desc.ConsumerARN)
	if consumerARN != "" && aws.ToString(desc.StreamARN) != "" && aws.ToString(desc.StreamARN) != streamARN {
		return "", fmt.Errorf("field enhanced_fan_out.consumer_arn: the consumer belongs to %s, not to stream %s", aws.ToString(desc.StreamARN), streamARN)
	}
	return arn, nil
}

// noInitialResponse is the Kinesis protocol without the `initial-response`
// event at the start of a subscription, for emulators that never send it.
type noInitialResponse struct{ smithyhttp.ClientProtocol }

func (noInitialResponse) HasInitialEventMessage() bool { return false }

// WithoutInitialResponse is a client option for SubscribeToShard against an
// emulator that omits the `initial-response` event (kinesis-mock): the SDK
// otherwise fails every subscription with "expected initial-response".
func WithoutInitialResponse(o *kinesis.Options) {
	if _, done := o.Protocol.(noInitialResponse); !done {
		o.Protocol = noInitialResponse{o.Protocol}
	}
}

// OwnEventDecoder gives one SubscribeToShard call a protocol of its own.
// The client's protocol (awsjson) decodes event-stream messages with one
// decoder and one payload buffer for every stream of the client, so the
// subscriptions of two shards, read at once, would decode through the same
// buffer (the race detector reports it; events could be corrupted). A
// fresh protocol per subscription decodes with its own.
func OwnEventDecoder(o *kinesis.Options) {
	o.Protocol = awsjson.New11(schemas.Kinesis_20131202)
}
