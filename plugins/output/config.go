package output

import (
	"fmt"
	"strings"

	"github.com/redpanda-data/benthos/v4/public/service"

	"github.com/connect-kinesis/connect-kinesis/internal/awsconf"
	"github.com/connect-kinesis/connect-kinesis/internal/kinesisx"
	"github.com/connect-kinesis/connect-kinesis/internal/producer"
)

// outputConfig is the parsed, validated configuration.
type outputConfig struct {
	Stream       string
	PartitionKey *service.InterpolatedString
	// partitionKeyMeta is the metadata key when partition_key is exactly
	// `${! meta("<key>") }`, read without Bloblang (see keyOf).
	partitionKeyMeta string
	HashKey          *service.InterpolatedString // nil when unset
	MaxInFlight      int
	PreserveOrder    bool
	// OrderedBatches is how many batches an ordered output writes at once,
	// 0 for the default (see batchesInFlight).
	OrderedBatches int
	Batching       service.BatchPolicy
	// batchingRaw is the batching field as written, with its defaults, for
	// the policy with the output's numbering appended (batchorder.go).
	batchingRaw   any
	MaxRecordSize int
	Aggregation   producer.Aggregation
	Backoff       kinesisx.Backoff
	AWS           awsconf.Settings
}

// outputConfigFromParsed reads and checks the fields; a value out of range
// fails with an error naming the field and the accepted values.
func outputConfigFromParsed(conf *service.ParsedConfig) (c outputConfig, err error) {
	if c.Stream, err = conf.FieldString(fieldStream); err != nil {
		return c, err
	}
	if strings.TrimSpace(c.Stream) == "" {
		return c, fmt.Errorf("field %s: it is empty; give the stream's name or ARN", fieldStream)
	}
	if c.PartitionKey, err = conf.FieldInterpolatedString(fieldPartitionKey); err != nil {
		return c, err
	}
	if raw, err := conf.FieldString(fieldPartitionKey); err == nil {
		if m := metaKeyRef.FindStringSubmatch(raw); m != nil {
			c.partitionKeyMeta = m[1]
		}
	}
	if conf.Contains(fieldHashKey) {
		if c.HashKey, err = conf.FieldInterpolatedString(fieldHashKey); err != nil {
			return c, err
		}
	}
	if c.MaxInFlight, err = conf.FieldMaxInFlight(); err != nil {
		return c, err
	}
	if c.MaxInFlight < 1 {
		return c, fmt.Errorf("field %s: %d must be at least 1", fieldMaxInFlight, c.MaxInFlight)
	}
	if c.PreserveOrder, err = conf.FieldBool(fieldPreserveOrder); err != nil {
		return c, err
	}
	if c.OrderedBatches, err = conf.FieldInt(fieldOrderedBatches); err != nil {
		return c, err
	}
	if c.OrderedBatches < 0 || c.OrderedBatches > c.MaxInFlight {
		return c, fmt.Errorf("field %s: %d is out of range; accepted values are 0 (the default: %s with batching, 1 without) and 1 (one batch at a time) to %s (%d)", fieldOrderedBatches, c.OrderedBatches, fieldMaxInFlight, fieldMaxInFlight, c.MaxInFlight)
	}
	if c.Batching, err = conf.FieldBatchPolicy(fieldBatching); err != nil {
		return c, err
	}
	if c.batchingRaw, err = conf.FieldAny(fieldBatching); err != nil {
		return c, err
	}
	if c.MaxRecordSize, err = conf.FieldInt(fieldMaxRecordSize); err != nil {
		return c, err
	}
	if c.MaxRecordSize < 1 || c.MaxRecordSize > kinesisx.MaxRecordSizeLimit {
		return c, fmt.Errorf("field %s: %d is out of range; accepted values are 1 to %d bytes (default %d)", fieldMaxRecordSize, c.MaxRecordSize, kinesisx.MaxRecordSizeLimit, kinesisx.DefaultMaxRecordSize)
	}
	agg := conf.Namespace(fieldAggregation)
	if c.Aggregation.Enabled, err = agg.FieldBool(fieldAggEnabled); err != nil {
		return c, err
	}
	if c.Aggregation.MaxBytes, err = agg.FieldInt(fieldAggMaxBytes); err != nil {
		return c, err
	}
	if c.Aggregation.MaxRecords, err = agg.FieldInt(fieldAggMaxRecords); err != nil {
		return c, err
	}
	if c.Aggregation.Enabled && (c.Aggregation.MaxBytes < minAggMaxBytes || c.Aggregation.MaxBytes > c.MaxRecordSize) {
		return c, fmt.Errorf("field %s.%s: %d is out of range; accepted values are %d to %s (%d)", fieldAggregation, fieldAggMaxBytes, c.Aggregation.MaxBytes, minAggMaxBytes, fieldMaxRecordSize, c.MaxRecordSize)
	}
	if c.Aggregation.MaxRecords < 1 {
		return c, fmt.Errorf("field %s.%s: %d must be at least 1", fieldAggregation, fieldAggMaxRecords, c.Aggregation.MaxRecords)
	}
	if c.Backoff, err = kinesisx.BackoffFromParsed(conf); err != nil {
		return c, err
	}
	if c.AWS, err = awsconf.SettingsFromParsed(conf); err != nil {
		return c, err
	}
	return c, nil
}

// batchesInFlight is how many WriteBatch calls Benthos may run at once.
// Benthos starts each on its own goroutine, so batches handed over together
// reach the output in no set order. An ordered output with batching numbers
// its batches as they are formed and writes them in that order
// (batchorder.go), so by default it takes max_in_flight at once. Without
// batching there are no numbers: it takes one at a time unless
// ordered_batches_in_flight accepts batches in the order they reach it.
// Overlapping batches are sequenced by partition key (producer.Reserve).
func (c outputConfig) batchesInFlight() int {
	switch {
	case !c.PreserveOrder:
		return c.MaxInFlight
	case c.OrderedBatches > 0:
		return c.OrderedBatches
	case c.Batching.IsNoop():
		return 1
	default:
		return c.MaxInFlight
	}
}

// numbered reports whether the output numbers its batches as its batching
// forms them, and writes them in that order.
func (c outputConfig) numbered() bool {
	return c.PreserveOrder && !c.Batching.IsNoop() && c.batchesInFlight() > 1
}
