package checkpointer

import (
	"context"
	"fmt"
	"net"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/connect-kinesis/connect-kinesis/internal/consumer"
	"github.com/connect-kinesis/connect-kinesis/internal/testenv"
)

// countedCheckpointer is group's checkpointer on the Redis at url, through
// a client whose commands hook counts.
func countedCheckpointer(t *testing.T, url, group string) (*Checkpointer, *countingHook) {
	t.Helper()
	cfg := DefaultConfig()
	cfg.RedisURL, cfg.Group = url, group
	opts, err := redis.ParseURL(url)
	require.NoError(t, err)
	client := redis.NewClient(opts)
	t.Cleanup(func() { client.Close() })
	hook := &countingHook{}
	client.AddHook(hook)
	return NewFromClient(client, cfg, nil, nil), hook
}

// countingHook counts the commands a client sends (its round trips).
type countingHook struct{ n atomic.Int64 }

func (h *countingHook) DialHook(next redis.DialHook) redis.DialHook {
	return func(ctx context.Context, network, addr string) (net.Conn, error) { return next(ctx, network, addr) }
}

func (h *countingHook) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		h.n.Add(1)
		return next(ctx, cmd)
	}
}

func (h *countingHook) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return func(ctx context.Context, cmds []redis.Cmder) error {
		h.n.Add(int64(len(cmds)))
		return next(ctx, cmds)
	}
}

// serverCalls sums `calls` over INFO commandstats: commands run by the
// server, those run inside scripts included.
func serverCalls(t *testing.T, c *redis.Client) int64 {
	info, err := c.Info(t.Context(), "commandstats").Result()
	require.NoError(t, err)
	var total int64
	for _, line := range strings.Split(info, "\n") {
		if !strings.HasPrefix(line, "cmdstat_") {
			continue
		}
		_, stats, _ := strings.Cut(line, ":")
		for _, kv := range strings.Split(stats, ",") {
			if v, ok := strings.CutPrefix(kv, "calls="); ok {
				n, err := strconv.ParseInt(strings.TrimSpace(v), 10, 64)
				require.NoError(t, err)
				total += n
			}
		}
	}
	return total
}

// TestIntegrationSteadyStateCost replays one minute of a group's steady
// state with the default periods, call for call as the input schedules them,
// and measures what Redis does. Nothing sleeps: the figure is the cost per
// minute of wall time, whatever the machine's speed.
//
// Per instance and minute: renew all leases + heartbeat every lease.period/3
// (18 each), and every rebalance_period (6 times) LiveMembers, Leases,
// ClosedShards and HandoffRequests, and the group check every second
// (consumer.GroupCheckInterval: 60). Per shard and minute: a commit every
// commit_period (12).
func TestIntegrationSteadyStateCost(t *testing.T) {
	const instances, shards = 2, 16
	r := testenv.NewRedis(t)
	admin := r.Client()
	defer admin.Close()

	ck, hook := countedCheckpointer(t, r.URL(), "cost")
	cfg := DefaultConfig()
	s := ck.Stream("arn:aws:kinesis:us-east-1:000000000000:stream/cost")
	ctx := t.Context()

	owned := make([][]consumer.Lease, instances)
	for i := 0; i < shards; i++ {
		owner := fmt.Sprintf("instance-%d", i%instances)
		l, err := leaseOf(s.Acquire(ctx, fmt.Sprintf("shardId-%012d", i), owner))
		require.NoError(t, err)
		owned[i%instances] = append(owned[i%instances], l)
	}

	minute := time.Minute
	renewals := int(minute / (cfg.LeasePeriod / 3))
	rebalances := int(minute / cfg.RebalancePeriod)
	commits := int(minute / cfg.CommitPeriod)
	checks := int(minute / consumer.GroupCheckInterval(cfg.LeasePeriod))

	// Warm up: the first run of each script is EVALSHA, NOSCRIPT, then EVAL
	// (two round trips); a long-running instance has them cached.
	seq := 1000
	_, _, err := s.RenewAll(ctx, "instance-0", owned[0])
	require.NoError(t, err)
	require.NoError(t, s.Heartbeat(ctx, "instance-0"))
	_, err = s.LiveMembers(ctx)
	require.NoError(t, err)
	_, err = s.Leases(ctx)
	require.NoError(t, err)
	_, err = s.ClosedShards(ctx)
	require.NoError(t, err)
	_, err = s.HandoffRequests(ctx, "instance-0")
	require.NoError(t, err)
	require.NoError(t, s.CheckGroup(ctx))
	require.NoError(t, s.Commit(ctx, owned[0][0], consumer.Position{Sequence: strconv.Itoa(seq)}))

	startClient, startServer := hook.n.Load(), serverCalls(t, admin)
	for i := 0; i < instances; i++ {
		owner := fmt.Sprintf("instance-%d", i)
		for n := 0; n < renewals; n++ {
			renewed, lost, err := s.RenewAll(ctx, owner, owned[i])
			require.NoError(t, err)
			require.Empty(t, lost)
			owned[i] = renewed
			require.NoError(t, s.Heartbeat(ctx, owner))
		}
		for n := 0; n < rebalances; n++ {
			_, err := s.LiveMembers(ctx)
			require.NoError(t, err)
			_, err = s.Leases(ctx)
			require.NoError(t, err)
			_, err = s.ClosedShards(ctx)
			require.NoError(t, err)
			_, err = s.HandoffRequests(ctx, owner)
			require.NoError(t, err)
		}
		for n := 0; n < checks; n++ {
			require.NoError(t, s.CheckGroup(ctx))
		}
		for _, l := range owned[i] {
			for n := 0; n < commits; n++ {
				seq++
				require.NoError(t, s.Commit(ctx, l, consumer.Position{Sequence: strconv.Itoa(seq)}))
			}
		}
	}
	// The INFO call that reads the counter is itself counted once.
	clientCalls := hook.n.Load() - startClient
	server := serverCalls(t, admin) - startServer - 1

	wantClient := int64(instances*(2*renewals+4*rebalances+checks) + shards*commits)
	assert.Equal(t, wantClient, clientCalls, "each API call is one Redis round trip")
	perShard := float64(clientCalls) / shards
	t.Logf("steady state, %d instances x %d shards, default periods: %d round trips/min (%.1f per shard per minute, %.2f per shard per second); %d server commands/min including those inside scripts (%.1f per shard per minute)",
		instances, shards, clientCalls, perShard, perShard/60, server, float64(server)/shards)
	assert.Less(t, perShard, 30.0)
}
