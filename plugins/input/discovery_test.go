package input

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/connect-kinesis/connect-kinesis/internal/consumer"
	"github.com/connect-kinesis/connect-kinesis/internal/streams"
	"github.com/connect-kinesis/connect-kinesis/plugins/checkpointer"
)

const checkpointYAML = "checkpoint:\n  redis:\n    url: redis://localhost:6379\n  group: app\n"

// Patterns among `streams` make the consumer follow the streams they find;
// the names are read as before.
func TestConfigStreamPatterns(t *testing.T) {
	conf, err := Spec().ParseYAML("streams: [ orders, \"tenant-*\" ]\nstream_tags: { env: prod }\nstream_discovery_interval: 30s\nnew_stream_start_position: latest\n"+checkpointYAML, nil)
	require.NoError(t, err)
	c, err := ConfigFromParsed(conf)
	require.NoError(t, err)
	assert.Equal(t, []string{"orders"}, c.Consumer.Streams)
	assert.True(t, c.Consumer.FollowStreams)
	assert.Equal(t, []string{"tenant-*"}, c.Streams.Rules.Patterns)
	assert.Equal(t, map[string]string{"env": "prod"}, c.Streams.Rules.Tags)
	assert.Equal(t, 30*time.Second, c.Streams.Interval)
	assert.Equal(t, streams.NewStreamLatest, c.Streams.NewStreamStart)
	assert.Equal(t, streams.DefaultDeletedRetention, c.Streams.DeletedRetention)

	// Without a pattern nothing is followed, as before.
	conf, err = Spec().ParseYAML(minimalYAML, nil)
	require.NoError(t, err)
	c, err = ConfigFromParsed(conf)
	require.NoError(t, err)
	assert.False(t, c.Consumer.FollowStreams)
}

func TestConfigStreamPatternsRejectedNamingTheField(t *testing.T) {
	for _, tc := range []struct{ name, yaml, field string }{
		{"tags without a pattern", "streams: [ orders ]\nstream_tags: { env: prod }\n", "stream_tags"},
		{"an ARN pattern", "streams: [ \"arn:aws:kinesis:us-east-1:123456789012:stream/t-*\" ]\n", "streams"},
		{"a too short interval", "streams: [ \"t-*\" ]\nstream_discovery_interval: 1s\n", "stream_discovery_interval"},
		{"a consumer ARN for many streams", "streams: [ \"t-*\" ]\nenhanced_fan_out:\n  enabled: true\n  consumer_arn: arn:aws:kinesis:us-east-1:123456789012:stream/t-1/consumer/c:1\n", "consumer_arn"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			conf, err := Spec().ParseYAML(tc.yaml+checkpointYAML, nil)
			require.NoError(t, err)
			_, err = ConfigFromParsed(conf)
			require.Error(t, err)
			assert.Contains(t, err.Error(), tc.field)
		})
	}
}

// The consumer follows the readable streams of the group's result, a
// stream that appeared after the first listing at new_stream_start_position.
func TestFoundStreamsFromTheGroupsResult(t *testing.T) {
	created := time.UnixMilli(1_700_000_000_000)
	d := checkpointer.Discovery{ListedAt: created, Streams: []checkpointer.DiscoveredStream{
		{Identity: streams.Identity{Name: "t-1", ARN: "arn:t-1", Created: created, Status: "ACTIVE"}},
		{Identity: streams.Identity{Name: "t-2", ARN: "arn:t-2", Created: created, Status: "UPDATING"}, Appeared: true},
		{Identity: streams.Identity{Name: "t-3", ARN: "arn:t-3", Created: created, Status: "CREATING"}, Appeared: true},
		{Identity: streams.Identity{Name: "t-4", ARN: "arn:t-4", Created: created, Status: "ACTIVE"}, Gone: created},
	}}
	sc := streams.Config{NewStreamStart: streams.NewStreamTrimHorizon}
	got := foundStreams(d, sc, consumer.StartLatest)
	require.Len(t, got, 2)
	assert.Equal(t, "arn:t-1", got[0].Key)
	assert.Equal(t, consumer.StartLatest, got[0].Start, "a stream of the first listing starts at start_position")
	assert.Equal(t, "t-2", got[1].Name)
	assert.Equal(t, consumer.StartTrimHorizon, got[1].Start, "a stream that appeared starts at new_stream_start_position")
}
