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
	withMemoryLimit(t, 0, "")
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
	assert.Equal(t, int64(256<<20), cc.MaxBufferedBytes)
}

func TestConfigMaxBufferedBytesTakesSizesAndNumbers(t *testing.T) {
	for in, want := range map[string]int64{
		"256MiB": 256 << 20, "1GiB": 1 << 30, "512 KiB": 512 << 10, "64MB": 64e6, "1.5GiB": 3 << 29,
		"1048576": 1 << 20, "\"1048576\"": 1 << 20, "0": 0, "100B": 100, "2mib": 2 << 20,
	} {
		conf, err := Spec().ParseYAML(minimalYAML+"max_buffered_bytes: "+in+"\n", nil)
		require.NoError(t, err, in)
		c, err := ConfigFromParsed(conf)
		require.NoError(t, err, in)
		assert.Equal(t, want, c.Consumer.MaxBufferedBytes, in)
	}
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
		{"a size without a number", "max_buffered_bytes: MiB\n", "max_buffered_bytes"},
		{"an unknown unit", "max_buffered_bytes: 256 megs\n", "max_buffered_bytes"},
		{"a negative size", "max_buffered_bytes: -1\n", "max_buffered_bytes"},
		{"a list", "max_buffered_bytes: [1]\n", "max_buffered_bytes"},
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
