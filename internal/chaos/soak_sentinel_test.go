package chaos

import (
	"io"
	"sync"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/connect-kinesis/connect-kinesis/internal/testenv"
)

// TestIntegrationSoakSentinelIsReportedThroughStarted guards the
// failover-sentinel classes' Sentinel missing from the PIDs the soak
// reports through Started: a caller checking that no process outlives the
// run (the soak tests' assertGone, the verdict's leftovers) could not see a
// Sentinel left running.
func TestIntegrationSoakSentinelIsReportedThroughStarted(t *testing.T) {
	t.Parallel()
	master := testenv.NewRedis(t, testenv.RedisOptions{AppendOnly: true, ShippedACL: true})
	var mu sync.Mutex
	var pids []int
	s := &soak{sc: SoakConfig{Out: io.Discard}, failoverOn: true, promoter: promoterSentinel, minReplicas: 1}
	s.runner = &runner{cfg: Config{Started: func(pid int) {
		mu.Lock()
		defer mu.Unlock()
		pids = append(pids, pid)
	}}}
	s.red, s.rc = master, master.Client()
	defer func() { _ = s.rc.Close() }()
	defer s.closeFailover()
	require.NoError(t, s.setUpFailover(t.Context()))
	require.NotNil(t, s.sentinel)
	sentinel := s.sentinel.Process().PID()
	mu.Lock()
	defer mu.Unlock()
	assert.Contains(t, pids, sentinel, "the Sentinel (pid %d) is not among the PIDs reported through Started", sentinel)
}
