package checkpointer

import (
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/connect-kinesis/connect-kinesis/internal/consumer"
	"github.com/connect-kinesis/connect-kinesis/internal/testenv"
)

// Guards issue 60 item 1: two processes under one lease.instance_id both
// read the same shards. A second claim of a running process's id is
// refused with an error naming the id; a claim after the holder died
// (its beat stopped) waits for the beat to lapse and takes the id over;
// a claim after a graceful release is granted at once; and the process
// whose id was taken over while it was paused learns it (Lost).
func TestIntegrationInstanceIDIsClaimedPerProcess(t *testing.T) {
	t.Parallel()
	r := testenv.NewRedis(t)
	b := backend{url: r.URL(), kind: KindSimple}
	const period = 600 * time.Millisecond
	ckpt := func(t *testing.T) *Checkpointer {
		return newTestCheckpointer(t, b, t.Name(), func(c *Config) { c.LeasePeriod = period })
	}

	t.Run("a second process under a running one's id is refused", func(t *testing.T) {
		c := ckpt(t)
		first, err := c.ClaimInstance(t.Context(), "a")
		require.NoError(t, err)
		t.Cleanup(func() { _ = first.Release(t.Context()) })
		started := time.Now()
		_, err = c.ClaimInstance(t.Context(), "a")
		require.ErrorIs(t, err, ErrInstanceIDInUse)
		assert.Contains(t, err.Error(), `lease.instance_id "a" is in use by another running process of group`)
		assert.Less(t, time.Since(started), 2*period+time.Second, "refused once the holder's beat moved on, within about a lease period")
		other, err := c.ClaimInstance(t.Context(), "b")
		require.NoError(t, err, "another id is free")
		require.NoError(t, other.Release(t.Context()))
	})

	t.Run("a restart after a crash takes the id over once the dead beat lapsed", func(t *testing.T) {
		c := ckpt(t)
		// A process that died: its claim beat once and never again.
		_, err := c.runInstance(t.Context(), "a", "dead", "claim", 0)
		require.NoError(t, err)
		started := time.Now()
		again, err := c.ClaimInstance(t.Context(), "a")
		require.NoError(t, err)
		t.Cleanup(func() { _ = again.Release(t.Context()) })
		assert.GreaterOrEqual(t, time.Since(started), period/2, "waited for the dead beat to lapse")
		assert.Less(t, time.Since(started), 2*period+time.Second)
	})

	t.Run("a restart after a graceful stop claims at once", func(t *testing.T) {
		c := ckpt(t)
		first, err := c.ClaimInstance(t.Context(), "a")
		require.NoError(t, err)
		require.NoError(t, first.Release(t.Context()))
		started := time.Now()
		again, err := c.ClaimInstance(t.Context(), "a")
		require.NoError(t, err)
		t.Cleanup(func() { _ = again.Release(t.Context()) })
		assert.Less(t, time.Since(started), period/2)
	})

	t.Run("a process whose id was taken over while it was paused stops", func(t *testing.T) {
		c := ckpt(t)
		paused, err := c.ClaimInstance(t.Context(), "a")
		require.NoError(t, err)
		t.Cleanup(func() { _ = paused.Release(t.Context()) })
		// The new process claimed the id after the paused one's beat
		// lapsed: its nonce is in the hash now.
		require.NoError(t, c.client.HSet(t.Context(), c.InstancesKey(), "a", fmt.Sprintf("newer|%d", time.Now().UnixMilli())).Err())
		select {
		case <-paused.Lost():
		case <-time.After(5 * period):
			t.Fatal("the paused process was not told its id was taken over")
		}
		require.ErrorIs(t, paused.Err(), ErrInstanceIDInUse)
		assert.Contains(t, paused.Err().Error(), `lease.instance_id "a" of group`)
		v, err := c.client.HGet(t.Context(), c.InstancesKey(), "a").Result()
		require.NoError(t, err)
		assert.Contains(t, v, "newer|", "the old process leaves the new one's claim alone")
	})

	t.Run("a take never takes a live lease held under the taker's own id", func(t *testing.T) {
		s := ckpt(t).Stream("arn:aws:kinesis:us-east-1:000000000000:stream/orders")
		first, err := s.Acquire(t.Context(), "shard-1", "a")
		require.NoError(t, err)
		_, err = s.Acquire(t.Context(), "shard-1", "a")
		require.ErrorIs(t, err, consumer.ErrLeaseHeld, "the second process under id a waits for the lease to run out")
		var second consumer.Take
		require.Eventually(t, func() bool {
			second, err = s.Acquire(t.Context(), "shard-1", "a")
			return err == nil
		}, 5*time.Second, 50*time.Millisecond)
		assert.Greater(t, second.Token, first.Token, "a new token fences the first process out")
		_, err = s.Renew(t.Context(), first.Lease)
		assert.ErrorIs(t, err, consumer.ErrLeaseLost)
	})
}

// Guards a false refusal: a Redis restarted from an older snapshot (or a
// replica promoted with it) holds the entry of the process that ran under
// the id before this one (it crashed, and this one took the id over), its
// beat a lease period old or more. No process took the id from this one,
// yet its next beat found another nonce and stopped it with "taken over by
// another process". A beat yields only to another process's live claim.
func TestIntegrationInstanceClaimSurvivesAStaleEntryFromARestoredSnapshot(t *testing.T) {
	t.Parallel()
	r := testenv.NewRedis(t)
	b := backend{url: r.URL(), kind: KindSimple}
	const period = 600 * time.Millisecond
	c := newTestCheckpointer(t, b, t.Name(), func(c *Config) { c.LeasePeriod = period })
	running, err := c.ClaimInstance(t.Context(), "a")
	require.NoError(t, err)
	t.Cleanup(func() { _ = running.Release(t.Context()) })
	// The snapshot's entry: the crashed predecessor's nonce, its last beat
	// from before the crash (two lease periods ago).
	require.NoError(t, c.client.HSet(t.Context(), c.InstancesKey(), "a", fmt.Sprintf("crashed|%d", time.Now().Add(-2*period).UnixMilli())).Err())
	select {
	case <-running.Lost():
		t.Fatalf("the running process was told its id was taken over, by a stale entry: %v", running.Err())
	case <-time.After(3 * period):
	}
	v, err := c.client.HGet(t.Context(), c.InstancesKey(), "a").Result()
	require.NoError(t, err)
	assert.NotContains(t, v, "crashed|", "the running process's beat replaced the stale entry")
}

// Guards the claim against Redis losing or stalling under it: a Redis
// flushed (or restarted empty) while a process runs must not make it refuse
// itself, and its claim must hold again against a second process; a Redis
// that stalls for longer than a lease period is no take-over either.
func TestIntegrationInstanceClaimOutlivesAFlushAndAStall(t *testing.T) {
	t.Parallel()
	r := testenv.NewRedis(t)
	b := backend{url: r.URL(), kind: KindSimple}
	const period = 600 * time.Millisecond
	c := newTestCheckpointer(t, b, t.Name(), func(c *Config) { c.LeasePeriod = period })
	running, err := c.ClaimInstance(t.Context(), "a")
	require.NoError(t, err)
	t.Cleanup(func() { _ = running.Release(t.Context()) })

	require.NoError(t, c.client.FlushAll(t.Context()).Err())
	require.NoError(t, c.client.Do(t.Context(), "CLIENT", "PAUSE", (2*period).Milliseconds(), "ALL").Err())
	select {
	case <-running.Lost():
		t.Fatalf("the running process was told its id was taken over: %v", running.Err())
	case <-time.After(4 * period):
	}
	v, err := c.client.HGet(t.Context(), c.InstancesKey(), "a").Result()
	require.NoError(t, err, "the beat wrote the claim back")
	assert.NotEmpty(t, v)
	_, err = c.ClaimInstance(t.Context(), "a")
	require.ErrorIs(t, err, ErrInstanceIDInUse, "a second process is refused again")
}
