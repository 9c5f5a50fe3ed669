package input

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/connect-kinesis/connect-kinesis/internal/consumer"
)

const minimalYAML = `
streams: [ orders ]
checkpoint:
  redis:
    url: redis://localhost:6379
  group: app
`

func TestConfigDefaults(t *testing.T) {
	conf, err := Spec().ParseYAML(minimalYAML, nil)
	require.NoError(t, err)
	c, err := ConfigFromParsed(conf)
	require.NoError(t, err)
	cc := c.Consumer
	assert.Equal(t, []string{"orders"}, cc.Streams)
	assert.Equal(t, consumer.StartTrimHorizon, cc.StartPosition)
	assert.Equal(t, 1, cc.ShardMaxInFlight)
	assert.Equal(t, 1, cc.ShardParallelism)
	assert.Equal(t, 10000, cc.Limit)
	assert.Equal(t, 200*time.Millisecond, cc.PollInterval)
	assert.Equal(t, time.Second, cc.IdlePollInterval)
	assert.Equal(t, 10*time.Second, cc.DiscoveryInterval)
	assert.True(t, cc.Deaggregate)
	assert.Equal(t, "app", c.Checkpointer.Group)
	assert.Equal(t, c.Checkpointer.CommitPeriod, cc.CommitPeriod)
}

func TestConfigRejectsInvalidValuesNamingTheField(t *testing.T) {
	for _, tc := range []struct {
		name, extra, field string
	}{
		{"unknown start position", "start_position: earliest\n", "start_position"},
		{"at_timestamp without a time", "start_position: at_timestamp\n", "start_timestamp"},
		{"bad timestamp", "start_position: at_timestamp\nstart_timestamp: yesterday\n", "start_timestamp"},
		{"timestamp without at_timestamp", "start_timestamp: 2024-05-01T12:00:00Z\n", "start_timestamp"},
		{"too fast polling", "poll_interval: 50ms\n", "poll_interval"},
		{"idle faster than busy", "poll_interval: 500ms\nidle_poll_interval: 200ms\n", "idle_poll_interval"},
		{"limit above the service's", "limit: 20000\n", "limit"},
		{"zero in flight", "shard_max_in_flight: 0\n", "shard_max_in_flight"},
		{"zero lanes", "shard_parallelism: 0\n", "shard_parallelism"},
		{"too many lanes", "shard_parallelism: 65\n", "shard_parallelism"},
		{"lanes with several batches in flight", "shard_parallelism: 4\nshard_max_in_flight: 2\n", "shard_max_in_flight"},
		{"empty stream", "streams: [ \"\" ]\n", "streams"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			yaml := minimalYAML + tc.extra
			if tc.field == "streams" {
				yaml = tc.extra + "checkpoint:\n  redis:\n    url: redis://localhost:6379\n  group: app\n"
			}
			conf, err := Spec().ParseYAML(yaml, nil)
			if err != nil {
				assert.Contains(t, err.Error(), tc.field)
				return
			}
			_, err = ConfigFromParsed(conf)
			require.Error(t, err)
			assert.Contains(t, err.Error(), tc.field)
		})
	}
}

func TestConfigAtTimestamp(t *testing.T) {
	conf, err := Spec().ParseYAML(minimalYAML+"start_position: at_timestamp\nstart_timestamp: 2024-05-01T12:00:00Z\n", nil)
	require.NoError(t, err)
	c, err := ConfigFromParsed(conf)
	require.NoError(t, err)
	assert.Equal(t, time.Date(2024, 5, 1, 12, 0, 0, 0, time.UTC), c.Consumer.StartTimestamp)
}
