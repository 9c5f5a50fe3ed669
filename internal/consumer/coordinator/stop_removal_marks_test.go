package coordinator

import (
	"context"
	"log/slog"
	"testing"
	"time"

	"github.com/redpanda-data/benthos/v4/public/service"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/connect-kinesis/connect-kinesis/internal/consumer"
	"github.com/connect-kinesis/connect-kinesis/internal/consumer/consumertest"
)

// Guards the defect where a Close that cut a followed stream's removal
// short at its deadline left that stream's lapsing leases without their
// redelivery marks written back: the removal's context was cancelled at
// the deadline itself, so its keepMarks got an ended context, while the
// other streams' readers are ended marksReserve before the deadline and
// write theirs back.
func TestCloseCuttingARemovalShortStillWritesItsMarksBack(t *testing.T) {
	t.Parallel()
	api := newStreamsAPI()
	created := time.Unix(1_700_000_000, 0)
	api.create("s", 1, 0, created) // the stream the config names
	api.create("r", 1, 5, created)
	plain := &storesByStream{}
	marks := newMarksStore(time.Second)
	stores := func(id string) consumer.Store {
		if id == consumertest.FakeARNPrefix+"r" {
			return marks
		}
		return plain.get(id)
	}
	cfg := testConfig()
	cfg.FollowStreams = true
	// The removal waits for r's batch longer than the stop lasts.
	cfg.HandoffTimeout = 5 * time.Second
	var logs consumertest.SyncBuffer
	c, err := New(cfg, api, stores, service.NewLoggerFromSlog(slog.New(slog.NewTextHandler(&logs, &slog.HandlerOptions{Level: slog.LevelDebug}))), nil)
	require.NoError(t, err)
	defer func() {
		if t.Failed() {
			t.Log(logs.String())
		}
	}()
	require.NoError(t, c.Start(t.Context()))
	require.NoError(t, c.Follow(t.Context(), []Found{api.found("r", consumer.StartTrimHorizon)}))
	select {
	case b := <-c.Batches():
		require.Equal(t, "r", b.Stream) // in the pipeline, never acknowledged
	case <-time.After(10 * time.Second):
		t.Fatal("no batch of r")
	}
	removed := make(chan struct{})
	go func() {
		defer close(removed)
		c.RemoveStream(t.Context(), consumertest.FakeARNPrefix+"r")
	}()
	require.Eventually(t, func() bool { return len(c.FollowedStreams()) == 0 }, 5*time.Second, 5*time.Millisecond)

	ctx, cancel := context.WithTimeout(context.Background(), time.Second)
	defer cancel()
	_ = c.Close(ctx)
	select {
	case <-removed:
	case <-time.After(2 * time.Second):
		t.Fatal("the removal went on after Close")
	}
	assert.EqualValues(t, 1, marks.marker.written.Load(),
		"the marks of r, whose removal the stop cut short, were not written back (%d tries)", marks.marker.tries.Load())
}
