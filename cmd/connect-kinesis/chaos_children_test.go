package main

import (
	"context"
	"sync"
	"syscall"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/connect-kinesis/connect-kinesis/internal/chaos"
)

// startedPIDs collects the PIDs a chaos run reports through Config.Started.
type startedPIDs struct {
	mu   sync.Mutex
	pids []int
}

func (s *startedPIDs) add(pid int) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.pids = append(s.pids, pid)
	return len(s.pids)
}

// assertGone checks that no process the run started is left, not even
// unreaped: signal 0 reaches a zombie too.
func (s *startedPIDs) assertGone(t *testing.T) {
	t.Helper()
	s.mu.Lock()
	defer s.mu.Unlock()
	require.NotEmpty(t, s.pids, "the run reported the processes it started")
	for _, pid := range s.pids {
		assert.ErrorIs(t, syscall.Kill(pid, 0), syscall.ESRCH, "process %d outlived the chaos run", pid)
	}
}

// TestIntegrationChaosCancelledLeavesNoProcess cancels a short chaos run in
// the middle of its load, once an instance was killed and restarted by the
// schedule, and checks that every process it started (the three instances,
// the killed one's new incarnation, the producer) is gone when Run returns.
// An instance left heartbeating a Redis that no longer existed is what issue
// 20 saw after `make chaos`.
func TestIntegrationChaosCancelledLeavesNoProcess(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	var started startedPIDs
	_, err := chaos.Run(ctx, chaos.Config{
		Binary: binary, Dir: t.TempDir(), Seed: 1, Short: true, Logf: t.Logf,
		Started: func(pid int) {
			// Three instances, the producer, then the first restart.
			if started.add(pid) == 5 {
				cancel()
			}
		},
	})
	require.ErrorIs(t, err, context.Canceled)
	started.assertGone(t)
}
