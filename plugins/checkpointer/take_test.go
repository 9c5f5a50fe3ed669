package checkpointer

import (
	"bytes"
	"log/slog"
	"sync"
	"testing"
	"time"

	"github.com/redpanda-data/benthos/v4/public/service"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/connect-kinesis/connect-kinesis/internal/testenv"
)

// syncBuffer is a log sink the store's goroutines may write to.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// A take whose checkpoint, start override or shard start cannot be read
// gives the lease back at once (a held lease nobody reads would keep the
// shard unread), and logs an ERROR naming the key, field and value and the
// command that fixes it.
func TestIntegrationAcquireReleasesOnAMalformedValue(t *testing.T) {
	t.Parallel()
	red := testenv.NewRedis(t)
	c := red.Client()
	defer c.Close()
	for _, tc := range []struct{ name, field, value string }{
		{"checkpoint", "shard-0", "not-a-sequence"},
		{"start override", startField, "yesterday"},
		{"shard start", shardStartPrefix + "shard-0", "at_timestamp=soon"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var logs syncBuffer
			cfg := DefaultConfig()
			cfg.RedisURL, cfg.Group, cfg.LeasePeriod = red.URL(), t.Name(), 30*time.Second
			log := service.NewLoggerFromSlog(slog.New(slog.NewTextHandler(&logs, nil)))
			cp, err := New(t.Context(), cfg, log, nil)
			require.NoError(t, err)
			t.Cleanup(func() { _ = cp.Close() })
			s := cp.Stream("arn:aws:kinesis:us-east-1:000000000000:stream/s")
			_, err = s.Join(t.Context())
			require.NoError(t, err)
			require.NoError(t, c.HSet(t.Context(), s.Keys().Checkpoints, tc.field, tc.value).Err())

			_, err = s.Acquire(t.Context(), "shard-0", "a")
			require.Error(t, err)
			for _, want := range []string{s.Keys().Checkpoints, tc.field, tc.value, "checkpoints reset"} {
				assert.Contains(t, err.Error(), want)
			}
			leases, err := s.Leases(t.Context())
			require.NoError(t, err)
			assert.True(t, leases["shard-0"].Expired, "the lease is given back: %+v", leases["shard-0"])
			out := logs.String()
			assert.Contains(t, out, "level=ERROR")
			assert.Contains(t, out, tc.value)
			assert.Contains(t, out, "checkpoints reset")
		})
	}
}
