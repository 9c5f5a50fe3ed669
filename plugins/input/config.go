package input

import (
	"fmt"
	"time"

	"github.com/redpanda-data/benthos/v4/public/service"

	"github.com/connect-kinesis/connect-kinesis/internal/awsconf"
	"github.com/connect-kinesis/connect-kinesis/internal/consumer"
	"github.com/connect-kinesis/connect-kinesis/internal/kinesisx"
	"github.com/connect-kinesis/connect-kinesis/internal/streams"
	"github.com/connect-kinesis/connect-kinesis/plugins/checkpointer"
)

// Config is the parsed configuration of the input.
type Config struct {
	Consumer     consumer.Config
	Streams      streams.Config
	Checkpointer checkpointer.Config
	AWS          awsconf.Settings

	// Redelivery is the parsed `redelivery` policy; Consumer.Redelivery
	// holds it with deadLetter, its writer.
	Redelivery Redelivery
	deadLetter *deadLetter

	budgetNote string // how the default max_buffered_bytes was chosen, to log
}

// ConfigFromParsed reads and validates the input's fields.
func ConfigFromParsed(conf *service.ParsedConfig) (Config, error) {
	var c Config
	var err error
	cc := &c.Consumer
	if cc.Streams, err = conf.FieldStringList(fieldStreams); err != nil {
		return c, err
	}
	if c.Streams, err = streamsFromParsed(conf, cc); err != nil {
		return c, err
	}
	if cc.StartPosition, err = conf.FieldString(fieldStartPosition); err != nil {
		return c, err
	}
	raw, err := conf.FieldString(fieldStartTimestamp)
	if err != nil {
		return c, err
	}
	if raw != "" {
		if cc.StartTimestamp, err = time.Parse(time.RFC3339Nano, raw); err != nil {
			return c, fmt.Errorf("field %s: %q is not an RFC3339 time, e.g. 2024-05-01T12:00:00Z", fieldStartTimestamp, raw)
		}
		if cc.StartPosition != consumer.StartAtTimestamp {
			return c, fmt.Errorf("field %s: only used with start_position at_timestamp, not %s", fieldStartTimestamp, cc.StartPosition)
		}
	}
	if cc.ShardMaxInFlight, err = conf.FieldInt(fieldShardMaxInFlight); err != nil {
		return c, err
	}
	if cc.ShardParallelism, err = conf.FieldInt(fieldShardParallelism); err != nil {
		return c, err
	}
	if cc.ShardParallelism < 1 {
		// The consumer reads 0 as 1 for configurations built in code; in
		// YAML it is a mistake.
		return c, fmt.Errorf("field %s: %d must be within 1..%d", fieldShardParallelism, cc.ShardParallelism, consumer.MaxShardParallelism)
	}
	if cc.Limit, err = conf.FieldInt(fieldLimit); err != nil {
		return c, err
	}
	if cc.PollInterval, err = conf.FieldDuration(fieldPollInterval); err != nil {
		return c, err
	}
	if cc.IdlePollInterval, err = conf.FieldDuration(fieldIdlePollInterval); err != nil {
		return c, err
	}
	if cc.DiscoveryInterval, err = conf.FieldDuration(fieldDiscoveryInterval); err != nil {
		return c, err
	}
	if cc.Deaggregate, err = conf.FieldBool(fieldDeaggregate); err != nil {
		return c, err
	}
	if cc.LagWarnThreshold, err = conf.FieldDuration(fieldLagWarnThreshold); err != nil {
		return c, err
	}
	if cc.MaxBufferedBytes, c.budgetNote, err = maxBufferedBytesFromParsed(conf); err != nil {
		return c, err
	}
	if c.Checkpointer, err = checkpointer.ConfigFromParsed(conf); err != nil {
		return c, err
	}
	if c.Redelivery, err = RedeliveryFromParsed(conf); err != nil {
		return c, err
	}
	c.setRedelivery()
	cc.CommitPeriod = c.Checkpointer.CommitPeriod
	cc.LeasePeriod = c.Checkpointer.LeasePeriod
	cc.RebalancePeriod = c.Checkpointer.RebalancePeriod
	cc.HandoffTimeout = c.Checkpointer.HandoffTimeout
	cc.InstanceID = c.Checkpointer.InstanceID
	cc.Balance = consumer.BalanceMode(c.Checkpointer.Balance)
	cc.Backoff = kinesisx.DefaultBackoff
	if cc.EnhancedFanOut, err = enhancedFanOutFromParsed(conf.Namespace(fieldEnhancedFanOut), c.Checkpointer.Group); err != nil {
		return c, err
	}
	if c.AWS, err = awsconf.SettingsFromParsed(conf); err != nil {
		return c, err
	}
	if err := checkStreams(cc.Streams, c.AWS.Region); err != nil {
		return c, err
	}
	return c, cc.Validate()
}

// setRedelivery gives the consumer the policy, with the writer of its dead
// letter when it names one (its resources are set by newFromParsed).
func (c *Config) setRedelivery() {
	r := c.Redelivery
	c.Consumer.Redelivery = consumer.Redelivery{MaxAttempts: r.MaxAttempts, MaxRecordAge: r.MaxRecordAge, Isolate: r.Isolate, SkipMark: !r.Mark}
	c.deadLetter = nil
	if r.DeadLetter != "" {
		c.deadLetter = &deadLetter{label: r.DeadLetter, group: c.Checkpointer.Group}
		c.Consumer.Redelivery.DeadLetter = c.deadLetter
	}
}
