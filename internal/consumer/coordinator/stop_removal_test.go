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

// Guards the defect where Close, coming while a followed stream was being
// removed, cancelled what every coordinator runs under without waiting for
// that removal: its readers, still waiting for their in-flight batch, were
// ended without a final commit or a release, and the removal went on
// after Close returned. Close waits for the removal within its own
// deadline, and cuts it short at that deadline.
func TestCloseWaitsForAStreamBeingRemoved(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name     string
		closeIn  time.Duration
		released bool
	}{
		{name: "within the deadline", closeIn: 10 * time.Second, released: true},
		{name: "cut short at the deadline", closeIn: 500 * time.Millisecond, released: false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			api := newStreamsAPI()
			created := time.Unix(1_700_000_000, 0)
			api.create("s", 1, 0, created) // the stream the config names
			api.create("r", 1, 5, created)
			stores := &storesByStream{}
			cfg := testConfig()
			cfg.FollowStreams = true
			var logs consumertest.SyncBuffer
			c, err := New(cfg, api, stores.get, service.NewLoggerFromSlog(slog.New(slog.NewTextHandler(&logs, &slog.HandlerOptions{Level: slog.LevelDebug}))), nil)
			defer func() {
				if t.Failed() {
					t.Log(logs.String())
				}
			}()
			require.NoError(t, err)
			require.NoError(t, c.Start(t.Context()))
			require.NoError(t, c.Follow(t.Context(), []Found{api.found("r", consumer.StartTrimHorizon)}))

			// A batch of r is in the pipeline and never acknowledged.
			select {
			case b := <-c.Batches():
				require.Equal(t, "r", b.Stream)
			case <-time.After(10 * time.Second):
				t.Fatal("no batch of r")
			}
			removed := make(chan struct{})
			go func() {
				defer close(removed)
				c.RemoveStream(t.Context(), consumertest.FakeARNPrefix+"r")
			}()
			require.Eventually(t, func() bool { return len(c.FollowedStreams()) == 0 }, 5*time.Second, 5*time.Millisecond)

			began := time.Now()
			ctx, cancel := context.WithTimeout(context.Background(), tc.closeIn)
			defer cancel()
			_ = c.Close(ctx)
			took := time.Since(began)
			// RemoveStream returns just after its removal ended; cut
			// short, the removal ends as its context does: at once.
			grace := 200 * time.Millisecond
			if !tc.released {
				grace = time.Second
			}
			select {
			case <-removed:
			case <-time.After(grace):
				t.Fatalf("Close returned after %v with the removal still running", took)
			}
			assert.Less(t, took, tc.closeIn+time.Second, "Close kept to its deadline")
			st := stores.store(consumertest.FakeARNPrefix + "r")
			st.Mu.Lock()
			owner := st.LeaseMap["shardId-000000000000"].Owner
			st.Mu.Unlock()
			if tc.released {
				assert.Empty(t, owner, "the stream being removed released its lease after handoff_timeout")
			} else {
				assert.NotEmpty(t, owner, "cut short, the lease is left to lapse")
			}
		})
	}
}
