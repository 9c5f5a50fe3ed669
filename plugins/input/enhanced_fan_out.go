package input

import (
	"os"

	"github.com/redpanda-data/benthos/v4/public/service"

	"github.com/connect-kinesis/connect-kinesis/internal/consumer"
)

// enhancedFanOutField is the `enhanced_fan_out` group.
func enhancedFanOutField() *service.ConfigField {
	return service.NewObjectField(fieldEnhancedFanOut,
		service.NewBoolField(fieldEFOEnabled).
			Description("Read with SubscribeToShard instead of GetRecords polling: 2 MiB/s per shard for this consumer, at a charge. See [enhanced fan-out](../../enhanced-fan-out.md).").
			Default(false),
		service.NewStringField(fieldEFOConsumerName).
			Description("The stream consumer to read through. Empty uses `checkpoint.group`. Registered if missing and never deregistered: see [the stream consumer](../../enhanced-fan-out.md#the-stream-consumer).").
			Default(""),
		service.NewStringField(fieldEFOConsumerARN).
			Description("The ARN of an existing stream consumer to read through, in place of `consumer_name` (one stream only).").
			Default("").Advanced(),
	).Description("Enhanced fan-out: dedicated read throughput per shard; checkpoints, order, leases and metadata as with polling.")
}

// enhancedFanOutFromParsed reads the `enhanced_fan_out` group; the consumer
// name defaults to the checkpoint group, which names the application too.
func enhancedFanOutFromParsed(conf *service.ParsedConfig, group string) (consumer.EnhancedFanOut, error) {
	var (
		e   consumer.EnhancedFanOut
		err error
	)
	if e.Enabled, err = conf.FieldBool(fieldEFOEnabled); err != nil {
		return e, err
	}
	if e.ConsumerName, err = conf.FieldString(fieldEFOConsumerName); err != nil {
		return e, err
	}
	if e.ConsumerARN, err = conf.FieldString(fieldEFOConsumerARN); err != nil {
		return e, err
	}
	if e.Enabled && e.ConsumerName == "" && e.ConsumerARN == "" {
		e.ConsumerName = group
	}
	e.NoInitialResponse = os.Getenv(EnvEmulatorNoInitialResponse) == "true"
	return e, nil
}
