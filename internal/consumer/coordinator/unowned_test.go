package coordinator

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/connect-kinesis/connect-kinesis/internal/consumer"
	"github.com/connect-kinesis/connect-kinesis/internal/consumer/consumertest"
)

// Guards the defect where a released stream kept its last
// kinesis_input_shards_unowned value, so KinesisShardUnowned fired for
// good for a stream released on purpose. Not parallel: the gauge is in the
// tests' shared exporter.
func TestReleasedStreamDropsItsUnownedGauge(t *testing.T) {
	api := newStreamsAPI()
	api.create("s", 1, 0, time.Unix(1_700_000_000, 0)) // the stream the config names
	api.create("u-1", 2, 5, time.Unix(1_700_000_000, 0))
	arn := consumertest.FakeARNPrefix + "u-1"
	st := consumertest.NewStore(time.Hour)
	// A live member that reads nothing: this instance's fair share is one
	// of the two shards, so the other one has no reader.
	require.NoError(t, st.Heartbeat(t.Context(), "idle-member"))
	stores := &storesByStream{by: map[string]*consumertest.Store{arn: st}}
	cfg := testConfig()
	cfg.FollowStreams = true
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	var logs consumertest.SyncBuffer
	var got streamLog
	c := startAcking(ctx, t, cfg, api, stores, &logs, &got)

	unowned := consumer.MetricShardsUnowned + "{u-1}"
	require.NoError(t, c.Follow(ctx, []Found{api.found("u-1", consumer.StartTrimHorizon)}))
	require.Eventually(t, func() bool { v, ok := consumertest.Gauges.Get(unowned); return ok && v == 1 }, 5*time.Second, 10*time.Millisecond,
		"one ready shard of u-1 has no reader")

	// u-1 no longer matches: released on purpose, nobody here reads it.
	require.NoError(t, c.Follow(ctx, nil))
	require.Equal(t, 1, logs.Count("Stopped reading stream u-1"), logs.String())
	v, _ := consumertest.Gauges.Get(unowned)
	assert.Zero(t, v, "a stream this instance released reports no unowned shard")
}
