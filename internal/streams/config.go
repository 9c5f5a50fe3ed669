package streams

import (
	"fmt"
	"time"

	"github.com/redpanda-data/benthos/v4/public/service"

	"github.com/connect-kinesis/connect-kinesis/internal/lintrule"
)

// Field names of stream discovery in the `kinesis` input. FieldStreams is
// the input's existing `streams` field, whose entries may be patterns.
const (
	FieldStreams           = "streams"
	FieldStreamTags        = "stream_tags"
	FieldDiscoveryInterval = "stream_discovery_interval"
	FieldNewStreamStart    = "new_stream_start_position"
	FieldDeletedRetention  = "deleted_stream_retention"
)

// Values of new_stream_start_position.
const (
	NewStreamTrimHorizon = "trim_horizon"
	NewStreamLatest      = "latest"
	// NewStreamAsStart reads a stream that appears as the group's first
	// streams are read: from start_position (and start_timestamp).
	NewStreamAsStart = "start_position"
)

// Defaults and bounds.
const (
	DefaultDiscoveryInterval = 60 * time.Second
	// MinDiscoveryInterval keeps one group's listing (a ListStreams page
	// per 100 streams of the account, a ListTagsForStream per stream a
	// pattern matches with stream_tags) far below the account's
	// 5 calls/s, which every other caller of the account shares.
	MinDiscoveryInterval    = 5 * time.Second
	DefaultDeletedRetention = 24 * time.Hour
)

// Config is the parsed form of the discovery fields.
type Config struct {
	Rules Rules
	// Interval is how often the group lists the streams (one instance
	// of the group lists; the others read its result).
	Interval time.Duration
	// NewStreamStart is where a stream that appears after the group's
	// first listing starts: NewStreamTrimHorizon, NewStreamLatest or
	// NewStreamAsStart.
	NewStreamStart string
	// DeletedRetention is how long the Redis keys of a stream that was
	// deleted or stopped matching are kept, so that a stream that comes
	// back (a tag put back) resumes from its checkpoints; then they are
	// pruned.
	DeletedRetention time.Duration
}

// Fields are the discovery fields, which the input's spec lists next to
// `streams` (whose description is StreamsDescription).
func Fields() []*service.ConfigField {
	return []*service.ConfigField{
		service.NewStringMapField(FieldStreamTags).
			Description("Tags a stream found by a pattern of `streams` must carry, every one with this value (ListTagsForStream). Streams named without a pattern are read whatever their tags.").
			Example(map[string]any{"team": "payments", "env": "prod"}).
			Default(map[string]any{}).Advanced(),
		service.NewDurationField(FieldDiscoveryInterval).
			Description(fmt.Sprintf("How often the streams matching the patterns of `streams` are listed. One instance of the group lists per interval and shares the result through Redis. At least %v; a new stream is read within about two intervals. See [architecture](../../architecture.md#streams-found-at-runtime).", MinDiscoveryInterval)).
			LintRule(lintrule.Duration(FieldDiscoveryInterval, DefaultDiscoveryInterval.String())).
			Default(DefaultDiscoveryInterval.String()).Advanced(),
		service.NewStringEnumField(FieldNewStreamStart, NewStreamTrimHorizon, NewStreamLatest, NewStreamAsStart).
			Description("`trim_horizon` (the default): a stream a pattern finds after the group's first listing is read from its first record. `latest`: from when the group first takes one of its shards; `start_position`: as that says. See [tuning](../../tuning.md#new_stream_start_position-input).").
			Default(NewStreamTrimHorizon).Advanced(),
		service.NewDurationField(FieldDeletedRetention).
			Description("How long the checkpoints of a stream deleted or no longer matching are kept, so it resumes if it matches again; a stream recreated under the same name starts anew. See [architecture](../../architecture.md#streams-found-at-runtime).").
			LintRule(lintrule.Duration(FieldDeletedRetention, DefaultDeletedRetention.String())).
			Default(DefaultDeletedRetention.String()).Advanced(),
	}
}

// StreamsDescription is the description of the input's `streams` field.
const StreamsDescription = "The streams to read, by name, by ARN, or by a pattern with `*` and `?`. A name and the ARN of one stream share checkpoints. See [tuning](../../tuning.md#streams-input)."

// ConfigFromParsed reads the discovery fields next to the given entries of
// `streams` (the input reads that field itself).
func ConfigFromParsed(conf *service.ParsedConfig, entries []string) (Config, error) {
	tags, err := conf.FieldStringMap(FieldStreamTags)
	if err != nil {
		return Config{}, err
	}
	interval, err := conf.FieldDuration(FieldDiscoveryInterval)
	if err != nil {
		return Config{}, err
	}
	start, err := conf.FieldString(FieldNewStreamStart)
	if err != nil {
		return Config{}, err
	}
	retention, err := conf.FieldDuration(FieldDeletedRetention)
	if err != nil {
		return Config{}, err
	}
	return NewConfig(entries, tags, interval, start, retention)
}

// NewConfig builds and validates a Config from field values.
func NewConfig(entries []string, tags map[string]string, interval time.Duration, newStreamStart string, retention time.Duration) (Config, error) {
	rules, err := ParseRules(entries, tags)
	if err != nil {
		return Config{}, err
	}
	c := Config{Rules: rules, Interval: interval, NewStreamStart: newStreamStart, DeletedRetention: retention}
	return c, c.Validate()
}

// Validate names the field that is out of range and what it accepts.
func (c Config) Validate() error {
	switch {
	case c.Interval < MinDiscoveryInterval:
		return fmt.Errorf("field %s: %v is shorter than %v; ListStreams allows 5 calls per second for the whole account", FieldDiscoveryInterval, c.Interval, MinDiscoveryInterval)
	case c.DeletedRetention < 0:
		return fmt.Errorf("field %s: %v is negative; use 0s to delete a released stream's checkpoints at once, or a duration such as 24h", FieldDeletedRetention, c.DeletedRetention)
	}
	switch c.NewStreamStart {
	case NewStreamTrimHorizon, NewStreamLatest, NewStreamAsStart:
		return nil
	default:
		return fmt.Errorf("field %s: %q is not one of %s, %s, %s", FieldNewStreamStart, c.NewStreamStart, NewStreamTrimHorizon, NewStreamLatest, NewStreamAsStart)
	}
}

// StartFor returns where the shards without a checkpoint of a stream
// start: startPosition (the input's `start_position`) for a stream of the
// group's first listing or one named without a pattern, else (appeared:
// found later, or created again) what new_stream_start_position says.
// The result is one of the input's start_position values.
func (c Config) StartFor(appeared bool, startPosition string) string {
	if !appeared || c.NewStreamStart == NewStreamAsStart {
		return startPosition
	}
	return c.NewStreamStart
}
