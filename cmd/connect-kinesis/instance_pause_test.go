package main

import (
	"errors"
	"os/exec"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/connect-kinesis/connect-kinesis/internal/testenv"
)

// Guards the runtime half of issue 60 item 1, which only the checkpointer's
// Lost channel tested: a process paused for longer than lease.period, whose
// instance id a new process took over meanwhile, must say so at ERROR and
// exit non-zero once it wakes, leaving the new process reading.
func TestIntegrationAPausedProcessWhoseIDWasTakenOverExitsNonZero(t *testing.T) {
	t.Parallel()
	const stream = "paused-id"
	k := testenv.NewKinesisMock(t)
	r := testenv.NewRedis(t)
	k.MustCreateStream(t, stream, 1)
	client := k.Client()
	dir := t.TempDir()
	p := &producer{counter: map[string]int{}}
	p.put(t, client, stream, 50)

	first := startWithID(t, dir, "first", "a", k, r, stream)
	require.Eventually(t, func() bool {
		u, _, _ := check(deliveries(t, []*instance{first}))
		return u == p.total()
	}, 60*time.Second, 200*time.Millisecond, "the first process did not read the first records")

	require.NoError(t, first.cmd.Process.Signal(syscall.SIGSTOP))
	second := startWithID(t, dir, "second", "a", k, r, stream)
	require.Eventually(t, func() bool {
		return len(logLines(t, second, "Took over instance id a in group ids")) > 0
	}, 30*time.Second, 200*time.Millisecond, "the new process did not take the paused one's id over")
	p.put(t, client, stream, 50)
	all := []*instance{first, second}
	require.Eventually(t, func() bool {
		u, _, _ := check(deliveries(t, all))
		return u == p.total()
	}, 60*time.Second, 200*time.Millisecond, "the new process did not read on")

	exited := make(chan error, 1)
	go func() { exited <- first.cmd.Wait() }()
	require.NoError(t, first.cmd.Process.Signal(syscall.SIGCONT))
	select {
	case err := <-exited:
		var ee *exec.ExitError
		require.True(t, errors.As(err, &ee), "the woken process exits with an error status: %v", err)
		assert.NotZero(t, ee.ExitCode())
	case <-time.After(40 * time.Second):
		t.Fatal("the woken process whose id was taken over is still running")
	}
	lost := logLines(t, first, "was taken over by another process")
	require.NotEmpty(t, lost, "the take-over is logged")
	assert.Contains(t, lost[0], "level=error")
	assert.Nil(t, second.cmd.ProcessState, "the new process still runs")

	p.put(t, client, stream, 50)
	require.Eventually(t, func() bool {
		u, _, _ := check(deliveries(t, all))
		return u == p.total()
	}, 60*time.Second, 200*time.Millisecond, "the new process stopped reading")
}
