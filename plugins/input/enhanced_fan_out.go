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
			Description("Read every shard with SubscribeToShard (enhanced fan-out, over HTTP/2) instead of GetRecords polling. Each consumer gets its own 2 MiB/s per shard, at a charge. See [enhanced fan-out](../../enhanced-fan-out.md).").
			Default(false),
		service.NewStringField(fieldEFOConsumerName).
			Description("The stream consumer to read through. Empty uses `checkpoint.group`. Registered if missing and never deregistered: see [the stream consumer](../../enhanced-fan-out.md#the-stream-consumer).").
			Default(""),
		service.NewStringField(fieldEFOConsumerARN).
			Description("The ARN of an existing stream consumer to read through, in place of `consumer_name` (one stream only).").
			Default("").Advanced(),
	).Description("Enhanced fan-out: a dedicated read throughput per shard for this application, pushed with about 70 ms latency. Checkpoints, ordering across reshards, leases and metadata are the same as with polling.")
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
