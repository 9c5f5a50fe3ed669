package main

import (
	"context"
	"fmt"
	"os"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/connect-kinesis/connect-kinesis/plugins/checkpointer"
)

// The steady state's Redis calls with many small streams, against one
// stream of as many shards (issue 37: "steady-state Redis calls per shard
// stay within today's limit"). Leases, members, hand-off requests and
// balancing rounds are kept per stream, so each stream costs its renewals,
// heartbeats and rounds whatever its shard count; the part counts what the
// group's instances send Redis once every shard is leased and nothing is
// written, first for the streams found, then for one stream of
// streams × shards shards read by as many instances, in the same run.

// discoverySettle is left after every shard is leased, for balancing to
// finish moving shards, before the calls are counted.
const discoverySettle = 15 * time.Second

// redisFigures are the calls one window counted.
type redisFigures struct {
	window         time.Duration
	scripts, total int64 // script calls (round trips); every command, those in scripts too
	shards         int
}

func (r redisFigures) perShardMinute(n int64) float64 {
	return float64(n) / float64(r.shards) / r.window.Minutes()
}

// steadyRedis counts the group's Redis calls over window, after the settle.
func steadyRedis(ctx context.Context, rc *redis.Client, shards int, window time.Duration) (redisFigures, error) {
	if err := sleepCtx(ctx, discoverySettle); err != nil {
		return redisFigures{}, err
	}
	env := redisFigures{window: window, shards: shards}
	total0, err := redisCommands(ctx, rc)
	if err != nil {
		return env, err
	}
	stats0 := commandStats(ctx, rc)
	start := time.Now()
	if err := sleepCtx(ctx, window); err != nil {
		return env, err
	}
	stats1 := commandStats(ctx, rc)
	total1, err := redisCommands(ctx, rc)
	if err != nil {
		return env, err
	}
	env.window = time.Since(start)
	// The measurement's own INFO calls count themselves.
	env.total = total1 - total0 - 3
	for _, name := range []string{"evalsha", "eval", "evalsha_ro", "eval_ro"} {
		env.scripts += stats1[name] - stats0[name]
	}
	return env, nil
}

// oneStreamBaseline reads one stream of streams × shards shards with as
// many instances, named rather than found, in a group of its own, and
// counts its steady state's calls as steadyRedis does.
func oneStreamBaseline(ctx context.Context, f discoveryFlags, env *benchEnv, endpoint, name string, stops *[]func()) (redisFigures, error) {
	shards := f.streams * f.shards
	fmt.Fprintf(os.Stderr, "bench discovery: baseline, one stream of %d shards...\n", shards)
	arn, err := env.emu.CreateStream(ctx, name, shards)
	if err != nil {
		return redisFigures{}, err
	}
	const group = discoveryGroup + "-one"
	for i := range f.instances {
		stop, err := discoveryInstance(ctx, endpoint, env.red.URL(), name, group, fmt.Sprintf("o%d", i), f.interval)
		if err != nil {
			return redisFigures{}, err
		}
		*stops = append(*stops, stop)
	}
	cfg := checkpointer.DefaultConfig()
	cfg.RedisURL, cfg.Group = env.red.URL(), group
	ck, err := checkpointer.New(ctx, cfg, nil, nil)
	if err != nil {
		return redisFigures{}, err
	}
	defer ck.Close()
	deadline := time.Now().Add(f.timeout)
	for {
		ls, err := ck.Stream(arn).Leases(ctx)
		if err != nil {
			return redisFigures{}, err
		}
		n := 0
		for _, l := range ls {
			if l.Owner != "" && !l.Expired {
				n++
			}
		}
		if n == shards {
			break
		}
		if time.Now().After(deadline) {
			return redisFigures{}, fmt.Errorf("baseline: %d of %d shards leased after %v", n, shards, f.timeout)
		}
		if err := sleepCtx(ctx, 250*time.Millisecond); err != nil {
			return redisFigures{}, err
		}
	}
	rc := env.red.Client()
	defer rc.Close()
	return steadyRedis(ctx, rc, shards, f.redisWindow)
}

func printSteadyRedis(f discoveryFlags, many, one redisFigures) {
	fmt.Printf("steady state, Redis calls per shard per minute (%v counted, %v after every shard was leased; script calls are round trips, commands count those run inside scripts too):\n", many.window.Round(time.Second), discoverySettle)
	fmt.Printf("  %d streams of %d shards: %.1f script calls, %.1f commands\n", f.streams, f.shards, many.perShardMinute(many.scripts), many.perShardMinute(many.total))
	fmt.Printf("  1 stream of %d shards:   %.1f script calls, %.1f commands\n", one.shards, one.perShardMinute(one.scripts), one.perShardMinute(one.total))
	fmt.Printf("  ratio: %.2f× script calls, %.2f× commands\n", many.perShardMinute(many.scripts)/one.perShardMinute(one.scripts), many.perShardMinute(many.total)/one.perShardMinute(one.total))
}
