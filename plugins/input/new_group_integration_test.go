package input

import (
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/connect-kinesis/connect-kinesis/internal/consumer"
	"github.com/connect-kinesis/connect-kinesis/internal/testenv"
)

// TestIntegrationNewGroupReadsWithoutALeasePeriodWait starts the first
// instance of a brand-new group with a 30 s lease period: it takes its
// shards consumer.NewcomerWait (2 s) after it created the group record, not
// a lease period after. Both times are read from the Redis clock (the
// record's `created`, and each lease's expiry minus the period), so the
// wait checked is the rule's, whatever the machine's speed: no shard is
// taken before the rule allows, and the first take comes within a few
// rebalance rounds after it.
func TestIntegrationNewGroupReadsWithoutALeasePeriodWait(t *testing.T) {
	t.Parallel()
	emu := testenv.NewKinesisMock(t)
	red := testenv.NewRedis(t)
	const stream, group, period = "new-group", "g-new", 30 * time.Second
	arn := emu.MustCreateStream(t, stream, 2)
	writeN(t, emu, stream, "r", 10)
	// A Redis up for less than consumer.RestartWait may have restarted
	// empty under paused holders, and makes a newcomer wait that long: a
	// healthy Redis runs for longer.
	redisUpFor(t, red, consumer.RestartWait(period))
	c := &counting{}
	yaml := strings.Replace(inputYAML(stream, emu.Endpoint, red.URL(), group, "  start_position: trim_horizon\n"),
		"period: 3s", "period: "+period.String(), 1)
	startStream(t, yaml, c.handler)
	require.Eventually(t, func() bool { d, _ := c.tally("r"); return d == 10 }, 25*time.Second, 50*time.Millisecond,
		"the first records come well before a lease period")

	rc := red.Client()
	defer rc.Close()
	keys := "kinesis:{" + group + ":" + arn + "}:"
	created, err := rc.HGet(t.Context(), keys+"epoch", "created").Int64()
	require.NoError(t, err)
	leases, err := rc.HGetAll(t.Context(), keys+"lease").Result()
	require.NoError(t, err)
	require.Len(t, leases, 2)
	wait := consumer.NewcomerWait(period)
	for shard, v := range leases {
		parts := strings.Split(v, "|")
		exp, err := strconv.ParseInt(parts[len(parts)-2], 10, 64)
		require.NoError(t, err)
		// Taken at exp - period: the first renewal comes a third of a
		// period after the take, after this read.
		took := time.Duration(exp-created)*time.Millisecond - period
		t.Logf("%s taken %v after the group record was created (lease period %v, newcomer wait %v)", shard, took, period, wait)
		assert.GreaterOrEqual(t, took, wait, "%s: taken before the newcomer wait passed", shard)
		assert.Less(t, took, period/2, "%s: taken without waiting a lease period", shard)
	}
}

// TestIntegrationIdleHoldersReseedBeforeANewcomerTakes: an instance holds
// idle shards (nothing to commit, so no commit finds the store forgot)
// with a 30 s lease and the default 10 s rebalance and discovery periods,
// so its next renewal and its next read of the closed set (each balancing
// round reads it) are seconds away. Redis is
// flushed and a second instance starts at once: it waits only
// consumer.NewcomerWait (2 s), so it is the holder's group check, every
// second, that must make it re-seed before the newcomer takes anything.
func TestIntegrationIdleHoldersReseedBeforeANewcomerTakes(t *testing.T) {
	t.Parallel()
	emu := testenv.NewKinesisMock(t)
	red := testenv.NewRedis(t)
	const stream, group = "idle-holders", "g-idle"
	arn := emu.MustCreateStream(t, stream, outageShards)
	writeN(t, emu, stream, "before", 40)
	// The Redis runs for longer than consumer.RestartWait, as a healthy one
	// does: once flushed (no restart) the newcomer waits only the newcomer
	// wait, and the holder's group check must beat it.
	redisUpFor(t, red, consumer.RestartWait(30*time.Second))
	c := &counting{}
	yaml := strings.NewReplacer("    period: 3s\n    rebalance_period: 300ms\n", "    period: 30s\n    rebalance_period: 10s\n",
		"shard_discovery_interval: 1s", "shard_discovery_interval: 10s").
		Replace(inputYAML(stream, emu.Endpoint, red.URL(), group, "  start_position: trim_horizon\n"))
	startStream(t, yaml, c.handler)
	require.Eventually(t, func() bool { d, _ := c.tally("before"); return d == 40 }, 30*time.Second, 50*time.Millisecond)
	require.Equal(t, outageShards, liveLeases(t, red, group, arn))
	// Every commit of what was read has landed (commit_period 200 ms).
	time.Sleep(time.Second)
	owners := leaseOwners(t, red, group, arn)
	tokens := leaseTokens(t, red, group, arn)

	rc := red.Client()
	defer rc.Close()
	require.NoError(t, rc.FlushAll(t.Context()).Err())
	early := make(chan []string, 1)
	go func() { early <- newcomerTookEarly(t, red, group, arn, owners) }()
	startStream(t, yaml, c.handler)
	assert.Empty(t, <-early, "the newcomer took shards before the holder re-seeded the store")
	// The holder re-seeds its shards at its next check.
	require.Eventually(t, func() bool {
		got := leaseTokens(t, red, group, arn)
		for shard, tok := range tokens {
			if got[shard] != tok {
				return false
			}
		}
		return true
	}, 5*time.Second, 50*time.Millisecond, "the holder re-seeds its shards with their tokens")
	_, dups := c.tally("before")
	assert.Zero(t, dups, "nothing read again")
}

// redisUpFor waits until the Redis server has been up for at least d (INFO
// server counts whole seconds), as a long-running one has. Time must pass:
// there is nothing to poll for sooner.
func redisUpFor(t *testing.T, red *testenv.Redis, d time.Duration) {
	t.Helper()
	c := red.Client()
	defer c.Close()
	for {
		info, err := c.Info(t.Context(), "server").Result()
		require.NoError(t, err)
		for _, line := range strings.Split(info, "\n") {
			if v, ok := strings.CutPrefix(strings.TrimSpace(line), "uptime_in_seconds:"); ok {
				n, err := strconv.Atoi(v)
				require.NoError(t, err)
				if time.Duration(n)*time.Second > d {
					return
				}
			}
		}
		time.Sleep(250 * time.Millisecond)
	}
}
