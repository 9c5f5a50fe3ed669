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
			Description("Read every shard with SubscribeToShard (enhanced fan-out, over HTTP/2) instead of GetRecords polling. Each stream consumer gets its own 2 MiB/s per shard, pushed as records arrive, rather than sharing 2 MiB/s and 5 reads/s per shard with every polling application. Kinesis charges for it per consumer-shard hour and per GiB.").
			Default(false),
		service.NewStringField(fieldEFOConsumerName).
			Description("The stream consumer to read through. It is registered when the stream has none of that name and reused when it has (every instance of a group shares it). Empty uses `checkpoint.group`. The input never deregisters a consumer: when the application is retired, remove it with `connect-kinesis consumers deregister --stream <stream> --name <name>`.").
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
