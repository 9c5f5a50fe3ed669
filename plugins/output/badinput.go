package output

import (
	"errors"
	"fmt"
	"strings"

	"github.com/connect-kinesis/connect-kinesis/internal/kinesisx"
	"github.com/connect-kinesis/connect-kinesis/internal/producer"
)

// Messages the output cannot write as the user meant: some can never be
// written (they fail alone, and the error says what to change), and a key
// that came out as "null" is written but most likely is not what the user
// meant.

// MetricNullPartitionKeys counts the messages whose partition key came out
// as the text "null" (see noteNullKeys).
const MetricNullPartitionKeys = "kinesis_output_null_partition_keys_total"

// failure is one message of a batch that failed, and why.
type failure struct {
	index int
	err   error
}

// fieldError is an error a field's interpolation gave for a message.
type fieldError struct {
	field string
	err   error
}

func (e *fieldError) Error() string { return "interpolating " + e.field + ": " + e.err.Error() }
func (e *fieldError) Unwrap() error { return e.err }

// neverWritable returns, when some failures are of messages that can never
// be written, what the user can do about them, to follow the write's error:
// Benthos logs that error at ERROR on every attempt, and an input that
// replays failed messages (at least once) replays these forever, each
// failing the same way. It returns "" when none is of that kind.
func neverWritable(failures []failure) string {
	var (
		n      int
		fields = map[string]bool{}
		fe     *fieldError
	)
	for _, f := range failures {
		switch {
		case errors.As(f.err, &fe):
			fields[fe.field] = true
		case errors.Is(f.err, producer.ErrEmptyPartitionKey), errors.Is(f.err, producer.ErrPartitionKeyTooLong), errors.Is(f.err, producer.ErrPartitionKeyNotUTF8):
			fields[fieldPartitionKey] = true
		case errors.Is(f.err, producer.ErrInvalidHashKey):
			fields[fieldHashKey] = true
		case errors.Is(f.err, producer.ErrRecordTooLarge):
			fields[fieldMaxRecordSize] = true
		default:
			continue
		}
		n++
	}
	if n == 0 {
		return ""
	}
	var fixes []string
	if fields[fieldPartitionKey] {
		fixes = append(fixes, fmt.Sprintf("make `%s` give every message 1 to %d characters", fieldPartitionKey, kinesisx.MaxPartitionKeyLength))
	}
	if fields[fieldHashKey] {
		fixes = append(fixes, fmt.Sprintf("make `%s` give a decimal integer in [0, 2^128) or nothing", fieldHashKey))
	}
	if fields[fieldMaxRecordSize] {
		fixes = append(fixes, fmt.Sprintf("keep messages within `%s` (data plus partition key; raise it only if the stream takes larger records)", fieldMaxRecordSize))
	}
	return fmt.Sprintf(". %d of them can never be written: they fail the same way every time they are sent again, and an input that replays failed messages retries them forever. To fix, %s; to set such messages aside meanwhile, wrap this output in a `fallback` output whose next output takes them, as config/examples/output_dlq.yaml does",
		n, strings.Join(fixes, ", and "))
}

// noteNullKeys counts the messages of a batch whose partition key came out
// as "null", and warns once per output. It is what a Bloblang query that
// finds nothing gives (`json("user_id")` on a message without user_id,
// `meta("key")` without that metadata): every such message then lands on
// one shard under one key, which Kinesis takes without a word.
func (o *kinesisOutput) noteNullKeys(nulls, messages int) {
	o.mNullKeys.Incr(int64(nulls), kinesisx.StreamName(o.conf.Stream))
	o.nullKeys.Do(func() {
		o.log.With("stream", o.conf.Stream).Warnf(
			"%s gave %d of a batch's %d messages the key \"null\": the interpolation found no value for them (as `json(\"user_id\")` does on a message without user_id), so they all go to one shard under that one key. Give every message a value, or a default with `.or(...)`; if \"null\" is a real key, ignore this. The %s metric counts such messages. Logged once.",
			fieldPartitionKey, nulls, messages, MetricNullPartitionKeys)
	})
}
