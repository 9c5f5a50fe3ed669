package coordinator

import (
	"errors"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/redpanda-data/benthos/v4/public/service"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/connect-kinesis/connect-kinesis/internal/consumer"
	"github.com/connect-kinesis/connect-kinesis/internal/consumer/consumertest"
)

// Guards issue 60 item 11: a stop with a nacked batch said "Stopped
// reading in 2ms … were not acknowledged within lease.handoff_timeout
// (10s)", a wait it never made. The line says why the records were left.
func TestStopLineSaysANackedBatchWasLeftNotTimedOut(t *testing.T) {
	t.Parallel()
	api := consumertest.NewKinesis()
	const shard = "shardId-000000000000"
	api.Add(shard, &consumertest.KinesisShard{Records: 30})
	var logs consumertest.SyncBuffer
	log := service.NewLoggerFromSlog(slog.New(slog.NewTextHandler(&logs, &slog.HandlerOptions{Level: slog.LevelInfo})))
	cfg := testConfig()
	cfg.HandoffTimeout = 10 * time.Second
	c, err := New(cfg, api, func(string) consumer.Store { return consumertest.NewStore(time.Minute) }, log, nil)
	require.NoError(t, err)
	require.NoError(t, c.Start(t.Context()))
	select {
	case b := <-c.Batches():
		b.Ack(errors.New("output down"))
	case <-time.After(10 * time.Second):
		t.Fatal("no batch")
	}
	start := time.Now()
	require.NoError(t, c.Close(t.Context()))
	require.Less(t, time.Since(start), 5*time.Second, "the stop does not wait for a nacked batch")
	var line string
	for _, l := range strings.Split(logs.String(), "\n") {
		if strings.Contains(l, "Stopped reading in") {
			line = l
		}
	}
	require.NotEmpty(t, line, "no stop line:\n%s", logs.String())
	assert.NotContains(t, line, "within lease.handoff_timeout", "the stop did not wait for them")
	assert.Contains(t, line, "were nacked, or come after a nacked record, and a stopping input does not deliver them again", line)
}
