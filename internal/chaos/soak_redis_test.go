package chaos

import (
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/connect-kinesis/connect-kinesis/internal/testenv"
)

// A Redis pause drawn while a restart has the server down waits for it:
// both faults are carried out, and the server answers after them. Run at
// once, the pause signalled a process that no longer existed and ended the
// soak.
func TestSoakRedisFaultsTakeTurns(t *testing.T) {
	t.Parallel()
	red, err := testenv.StartRedis(t.Context(), testenv.RedisOptions{AppendOnly: true})
	testenv.Require(t, "starting redis-server", err)
	t.Cleanup(red.Close)
	s := &soak{runner: &runner{logf: func(string, ...any) {}, red: red, rc: red.Client(), plan: soakPlan}, start: time.Now(),
		active: map[string]int{}, quiet: map[string]time.Time{}}
	var wg sync.WaitGroup
	errs := make([]error, 2)
	for i, e := range []soakEvent{{class: ClassRedisRestart, dur: 1500 * time.Millisecond}, {class: ClassRedisPause, dur: 100 * time.Millisecond}} {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if i == 1 {
				time.Sleep(800 * time.Millisecond) // while the restart has it down
			}
			errs[i] = s.redisFault(t.Context(), e)
		}()
	}
	wg.Wait()
	require.NoError(t, errs[0], "the restart")
	require.NoError(t, errs[1], "the pause")
	require.NoError(t, red.Client().Ping(t.Context()).Err(), "Redis answers after both")
}
