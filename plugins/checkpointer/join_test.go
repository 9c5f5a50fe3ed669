package checkpointer

import (
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/connect-kinesis/connect-kinesis/internal/consumer"
	"github.com/connect-kinesis/connect-kinesis/internal/testenv"
)

// An instance's first contact with a group record created moments ago,
// that no re-seed marked, waits consumer.NewcomerWait after the record's
// creation (two group-check intervals: holders that Redis answers find the
// record replaced and re-seed within that), not a lease period: the wait
// is computed from the Redis clock, so the test measures nothing. A
// record a re-seed restored, or an older one, lets it take at once; one
// written in a newer format is refused, naming both versions.
func TestIntegrationJoinWaitsOnAYoungUnseededGroupRecord(t *testing.T) {
	t.Parallel()
	red := testenv.NewRedis(t)
	newStore := func(group string, period time.Duration) *Store {
		cfg := DefaultConfig()
		cfg.RedisURL, cfg.Group, cfg.LeasePeriod = red.URL(), group, period
		c, err := New(t.Context(), cfg, nil, nil)
		require.NoError(t, err)
		t.Cleanup(func() { _ = c.Close() })
		return c.Stream("arn:aws:kinesis:us-east-1:000000000000:stream/s")
	}

	t.Run("young server", func(t *testing.T) {
		// This Redis started moments ago: it may be one that restarted
		// empty while holders were paused, so a newcomer waits until it
		// has been up a lease period and the newcomer wait.
		const period = 30 * time.Second
		s := newStore("young", period)
		wait, err := s.Join(t.Context())
		require.NoError(t, err)
		up, young := s.JoinedYoungServer()
		require.True(t, young)
		assert.Equal(t, consumer.RestartWait(period), 32*time.Second)
		assert.LessOrEqual(t, wait, consumer.RestartWait(period)-up, "until it has been up 32 s (INFO counts whole seconds)")
		assert.Greater(t, wait, consumer.RestartWait(period)-up-time.Second-200*time.Millisecond)
	})

	// Past RestartWait of the periods below, the server is no longer young:
	// the wait is the newcomer wait alone, as on a Redis that runs for long.
	c := red.Client()
	defer c.Close()
	for {
		info, err := c.Info(t.Context(), "server").Result()
		require.NoError(t, err)
		if strings.Contains(info, "uptime_in_seconds:6") {
			break
		}
		time.Sleep(100 * time.Millisecond) // the server must age: nothing to poll for sooner
	}
	t.Run("new record", func(t *testing.T) {
		assert.Equal(t, 2*time.Second, consumer.NewcomerWait(30*time.Second))
		assert.Equal(t, 2*time.Second, consumer.NewcomerWait(10*time.Second))
		for period, want := range map[time.Duration]time.Duration{
			3 * time.Second: 2 * time.Second, 900 * time.Millisecond: 600 * time.Millisecond,
		} {
			group := "fresh-" + period.String()
			s := newStore(group, period)
			wait, err := s.Join(t.Context())
			require.NoError(t, err)
			assert.Equal(t, consumer.NewcomerWait(period), wait, "a record created by this Join: the whole newcomer wait")
			assert.Equal(t, want, wait, "two check intervals of at most a second (a third of a shorter period)")
			_, young := s.JoinedYoungServer()
			assert.False(t, young)
			again, err := newStore(group, period).Join(t.Context())
			require.NoError(t, err)
			assert.Positive(t, again, "a second newcomer waits for the rest of it")
			assert.LessOrEqual(t, again, wait)
		}
	})

	t.Run("re-seeded record", func(t *testing.T) {
		holder := newStore("seeded", 3*time.Second)
		took, err := holder.Acquire(t.Context(), "shard-1", "a")
		require.NoError(t, err)
		_, err = holder.Reseed(t.Context(), consumer.Seed{Owner: "a", Leases: []consumer.Lease{took.Lease}})
		require.NoError(t, err)
		wait, err := newStore("seeded", 3*time.Second).Join(t.Context())
		require.NoError(t, err)
		assert.Zero(t, wait)
	})

	t.Run("record of the first format", func(t *testing.T) {
		s := newStore("old", 3*time.Second)
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
		s := newStore("newer", 3*time.Second)
		c := red.Client()
		defer c.Close()
		require.NoError(t, c.HSet(t.Context(), s.Keys().Epoch, "id", "abc", "start", 1, formatField, FormatVersion+1).Err())
		_, err := s.Join(t.Context())
		require.ErrorIs(t, err, ErrFormatTooNew)
		assert.Contains(t, err.Error(), "format 3")
		assert.Contains(t, err.Error(), "format 2")
	})
}
