package checkpointer

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/connect-kinesis/connect-kinesis/internal/consumer"
	"github.com/connect-kinesis/connect-kinesis/internal/testenv"
)

// An instance's first contact with a group record that a take created
// moments ago, and that no re-seed marked, waits a lease period: Redis may
// just have come back empty while other instances still read. A record a
// re-seed restored, or one older than a lease period, lets it take at once;
// one written in a newer format is refused, naming both versions.
func TestIntegrationJoinWaitsOnAYoungUnseededGroupRecord(t *testing.T) {
	t.Parallel()
	red := testenv.NewRedis(t)
	newStore := func(group string) *Store {
		cfg := DefaultConfig()
		cfg.RedisURL, cfg.Group, cfg.LeasePeriod = red.URL(), group, 3*time.Second
		c, err := New(t.Context(), cfg, nil, nil)
		require.NoError(t, err)
		t.Cleanup(func() { _ = c.Close() })
		return c.Stream("arn:aws:kinesis:us-east-1:000000000000:stream/s")
	}

	t.Run("new record", func(t *testing.T) {
		wait, err := newStore("fresh").Join(t.Context())
		require.NoError(t, err)
		assert.Greater(t, wait, 2*time.Second, "a record created now waits about a lease period")
		again, err := newStore("fresh").Join(t.Context())
		require.NoError(t, err)
		assert.Greater(t, again, time.Second, "a second newcomer waits for the rest of it")
		assert.LessOrEqual(t, again, wait)
	})

	t.Run("re-seeded record", func(t *testing.T) {
		holder := newStore("seeded")
		_, err := holder.Acquire(t.Context(), "shard-1", "a")
		require.NoError(t, err)
		_, err = holder.Reseed(t.Context(), consumer.Seed{Owner: "a"})
		require.NoError(t, err)
		wait, err := newStore("seeded").Join(t.Context())
		require.NoError(t, err)
		assert.Zero(t, wait)
	})

	t.Run("record of the first format", func(t *testing.T) {
		s := newStore("old")
		c := red.Client()
		defer c.Close()
		require.NoError(t, c.HSet(t.Context(), s.Keys().Epoch, "id", "abc", "start", time.Now().UnixMilli()).Err())
		wait, err := s.Join(t.Context())
		require.NoError(t, err)
		assert.Zero(t, wait, "a record without a creation time is an old release's: no wait")
		f, err := c.HGet(t.Context(), s.Keys().Epoch, formatField).Int()
		require.NoError(t, err)
		assert.Equal(t, FormatVersion, f, "the record is marked with this release's format")
	})

	t.Run("newer format", func(t *testing.T) {
		s := newStore("newer")
		c := red.Client()
		defer c.Close()
		require.NoError(t, c.HSet(t.Context(), s.Keys().Epoch, "id", "abc", "start", 1, formatField, FormatVersion+1).Err())
		_, err := s.Join(t.Context())
		require.ErrorIs(t, err, ErrFormatTooNew)
		assert.Contains(t, err.Error(), "format 3")
		assert.Contains(t, err.Error(), "format 2")
	})
}
