package input

import (
	"maps"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/connect-kinesis/connect-kinesis/internal/testenv"
)

// The frozen-Redis row of the outage table (store_outage_integration_test.go):
// Redis stalls over renewals, under load, with the default lease settings.

// TestIntegrationRedisFrozenIsNotALostLease freezes Redis (SIGSTOP) for
// 2.5 s three times under load with the default lease settings, each freeze
// placed over an instance's renewal (freezeOverRenewals): the renewal times
// out, but no lease's local deadline passes, so no reader stops, no lease
// changes hands and nothing is read twice. (Readers that stopped when a
// renewal timed out with half a lease period left fail here every run.)
func TestIntegrationRedisFrozenIsNotALostLease(t *testing.T) {
	t.Parallel()
	emu := testenv.NewKinesisMock(t)
	run := outageRun{
		start: "trim_horizon",
		lease: "  lease:\n    period: " + defaultLeasePeriod.String() + "\n    rebalance_period: 10s\n",
		fault: freezeOverRenewals,
	}
	written, delivered, dups, beforeDups, before, after := run.run(t, emu, "frozen")
	t.Logf("Redis frozen 2.5 s three times over renewals, default lease settings: %d written under load, %d lost, %d duplicates; %d duplicates of the 400 read before; lease tokens %v, then %v",
		written, written-delivered, dups, beforeDups, before, after)
	assert.Equal(t, written, delivered, "nothing lost")
	assert.Zero(t, dups+beforeDups, "nothing read twice")
	assert.Equal(t, before, after, "no lease lost and taken again")
}

// defaultLeasePeriod is the input's default lease.period; renewals run
// every third of it, each bounded by a sixth of it.
const defaultLeasePeriod = 10 * time.Second

// freezeOverRenewals freezes Redis for 2.5 s three times, each freeze
// starting 0.4 s before a renewal tick of one of the instances (taking
// turns), so that renewal waits on a frozen Redis past its own timeout (a
// sixth of the lease period, 1.67 s) and fails: the stall the issue saw
// stop readers, made certain rather than left to where the ticks fall.
func freezeOverRenewals(t *testing.T, red *testenv.Redis, leaseKey string) {
	ticks := renewalTicks(t, red, leaseKey)
	owners := slices.Sorted(maps.Keys(ticks))
	require.NotEmpty(t, owners)
	const lead, freeze = 400 * time.Millisecond, 2500 * time.Millisecond
	earliest := time.Now()
	for i := range 3 {
		tick := ticks[owners[i%len(owners)]]
		for tick.Add(-lead).Before(earliest) {
			tick = tick.Add(defaultLeasePeriod / 3)
		}
		time.Sleep(time.Until(tick.Add(-lead)))
		require.NoError(t, red.Pause())
		time.Sleep(freeze)
		require.NoError(t, red.Resume())
		// A gap of 2 s, as in the run: the next tick renews, so no
		// lease's local deadline passes (that is a longer outage's row).
		earliest = time.Now().Add(2 * time.Second)
	}
}

// renewalTicks watches the lease hash until each owner renewed twice one
// renewal period apart (so neither was a take or a late tick), and returns
// per owner the time of its last renewal: its renewal ticker fires on that
// phase every third of the lease period. A renewal writes an expiry of the
// Redis clock's now plus the lease period, and Redis runs on this host's
// clock.
func renewalTicks(t *testing.T, red *testenv.Redis, leaseKey string) map[string]time.Time {
	c := red.Client()
	defer c.Close()
	last := map[string]time.Time{}
	ticks := map[string]time.Time{}
	period := defaultLeasePeriod / 3
	for end := time.Now().Add(30 * time.Second); time.Now().Before(end); time.Sleep(10 * time.Millisecond) {
		all, err := c.HGetAll(t.Context(), leaseKey).Result()
		require.NoError(t, err)
		latest := map[string]time.Time{}
		for _, v := range all {
			parts := strings.Split(v, "|")
			owner := strings.Join(parts[:len(parts)-2], "|")
			exp, _ := strconv.ParseInt(parts[len(parts)-2], 10, 64)
			if at := time.UnixMilli(exp).Add(-defaultLeasePeriod); owner != "" && at.After(latest[owner]) {
				latest[owner] = at
			}
		}
		for owner, at := range latest {
			prev, seen := last[owner]
			if seen && at.After(prev) {
				if gap := at.Sub(prev); gap > period-150*time.Millisecond && gap < period+150*time.Millisecond {
					ticks[owner] = at
				}
			}
			last[owner] = at
		}
		if len(ticks) == 2 {
			return ticks
		}
	}
	require.Failf(t, "no renewal phase", "saw renewals %v, one period apart %v", last, ticks)
	return nil
}
