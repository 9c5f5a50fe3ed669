package consumer

import (
	"context"
	"errors"
	"fmt"
	"regexp"
	"strings"

	"github.com/aws/aws-sdk-go-v2/service/kinesis"
)

// EnhancedFanOut is the parsed `enhanced_fan_out` group. Disabled, shards are
// read with GetRecords polling.
type EnhancedFanOut struct {
	Enabled bool
	// ConsumerName is the stream consumer to use: registered when the
	// stream has none of that name, reused when it has.
	ConsumerName string
	// ConsumerARN names an existing stream consumer instead; it is used
	// as is and must belong to the (single) configured stream.
	ConsumerARN string
	// NoInitialResponse reads subscriptions that start without the
	// `initial-response` event Kinesis sends first. Only emulators
	// (kinesis-mock) omit it; against Kinesis it must stay false.
	NoInitialResponse bool
}

// EnvEmulatorNoInitialResponse, set to "true", makes enhanced fan-out read
// subscriptions that lack the `initial-response` event (NoInitialResponse).
// Only emulators (kinesis-mock) omit it: it is for tests against them and
// never needed with Kinesis.
const EnvEmulatorNoInitialResponse = "CONNECT_KINESIS_EMULATOR_NO_INITIAL_RESPONSE"

// validate names the field that is wrong and what it accepts.
func (e EnhancedFanOut) validate(streams []string) error {
	switch {
	case !e.Enabled:
		return nil
	case e.ConsumerName == "" && e.ConsumerARN == "":
		return errors.New("field enhanced_fan_out.consumer_name: set the name of the stream consumer to register or reuse (or enhanced_fan_out.consumer_arn)")
	case e.ConsumerName != "" && e.ConsumerARN != "":
		return errors.New("fields enhanced_fan_out.consumer_name and enhanced_fan_out.consumer_arn: set one, not both")
	case e.ConsumerARN != "" && !strings.Contains(e.ConsumerARN, "/consumer/"):
		return fmt.Errorf("field enhanced_fan_out.consumer_arn: %q is not a stream consumer ARN (arn:aws:kinesis:<region>:<account>:stream/<stream>/consumer/<name>:<timestamp>)", e.ConsumerARN)
	case e.ConsumerARN != "" && len(streams) > 1:
		return errors.New("field enhanced_fan_out.consumer_arn: a consumer belongs to one stream, but several streams are listed; use enhanced_fan_out.consumer_name instead")
	case e.ConsumerName != "" && !consumerNamePattern.MatchString(e.ConsumerName):
		return fmt.Errorf("field enhanced_fan_out.consumer_name: %q is not a stream consumer name: 1 to 128 letters, digits, '_', '.' or '-' (it defaults to checkpoint.group)", e.ConsumerName)
	}
	return nil
}

// consumerNamePattern is what Kinesis accepts as a stream consumer name.
var consumerNamePattern = regexp.MustCompile(`^[a-zA-Z0-9_.-]{1,128}$`)

// FanOutAPI is the part of the Kinesis client enhanced fan-out calls, on
// top of KinesisAPI. The SDK's *kinesis.Client implements it.
type FanOutAPI interface {
	RegisterStreamConsumer(ctx context.Context, in *kinesis.RegisterStreamConsumerInput, opts ...func(*kinesis.Options)) (*kinesis.RegisterStreamConsumerOutput, error)
	DescribeStreamConsumer(ctx context.Context, in *kinesis.DescribeStreamConsumerInput, opts ...func(*kinesis.Options)) (*kinesis.DescribeStreamConsumerOutput, error)
	SubscribeToShard(ctx context.Context, in *kinesis.SubscribeToShardInput, opts ...func(*kinesis.Options)) (*kinesis.SubscribeToShardOutput, error)
}
