package checkpointer

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/connect-kinesis/connect-kinesis/internal/testenv"
)

// Guards a second process under a running one's instance id that was
// waiting for that id when Redis forgot (restarted empty, flushed): it
// found the id free and took it, and the running process, which never
// stopped beating, was told at its next beat that it had been paused and
// its id taken over, and stopped. The running process keeps the id; the
// second is refused as it would have been without the wipe.
func TestIntegrationASecondClaimWaitingAcrossAWipeIsStillRefused(t *testing.T) {
	t.Parallel()
	r := testenv.NewRedis(t)
	b := backend{url: r.URL(), kind: KindSimple}
	const period = 3 * time.Second
	c := newTestCheckpointer(t, b, t.Name(), func(c *Config) { c.LeasePeriod = period })
	running, err := c.ClaimInstance(t.Context(), "a")
	require.NoError(t, err)
	t.Cleanup(func() { _ = running.Release(t.Context()) })

	second := make(chan error, 1)
	go func() {
		ic, err := c.ClaimInstance(t.Context(), "a")
		if err == nil {
			_ = ic.Release(t.Context())
		}
		second <- err
	}()
	// The second claim found the id beating and waits for the beat to
	// move; Redis forgets meanwhile.
	time.Sleep(period / 12)
	require.NoError(t, c.client.FlushAll(t.Context()).Err())
	select {
	case err := <-second:
		require.ErrorIs(t, err, ErrInstanceIDInUse, "the second process is refused")
	case <-time.After(4 * period):
		t.Fatal("the second claim neither got nor was refused the id")
	}
	select {
	case <-running.Lost():
		t.Fatalf("the running process lost its id: %v", running.Err())
	case <-time.After(period / 2):
	}
	assert.NoError(t, running.Err())
}
