package main

import (
	"context"
	"flag"
	"fmt"
	"log/slog"
	"maps"
	"os"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/redpanda-data/benthos/v4/public/service"

	"github.com/connect-kinesis/connect-kinesis/internal/testenv"
	"github.com/connect-kinesis/connect-kinesis/plugins/checkpointer"
)

func init() {
	parts["discovery"] = part{
		summary: "issue 37's bound: streams created while instances follow a pattern (kinesis-mock, in-process inputs); time from ACTIVE to every shard leased against 3 × stream_discovery_interval",
		run:     runDiscovery,
	}
}

type discoveryFlags struct {
	streams, shards, instances int
	interval, timeout          time.Duration
	// redisWindow is how long the steady state's Redis calls are counted
	// (discovery_redis.go); 0 skips that part.
	redisWindow time.Duration
}

const discoveryGroup = "discovery"

// runDiscovery starts the instances on a pattern that matches nothing,
// lets the group list once, creates the streams (8 at a time, each ACTIVE
// at once: kinesis-mock's CREATE_STREAM_DURATION is 0 ms here), and reads
// each stream's leases through the checkpointer every 250 ms until all
// its shards hold a live lease.
func runDiscovery(ctx context.Context, args []string) error {
	var f discoveryFlags
	fs := flag.NewFlagSet("discovery", flag.ContinueOnError)
	fs.IntVar(&f.streams, "streams", 100, "streams created while the instances run")
	fs.IntVar(&f.shards, "shards", 4, "shards of each stream")
	fs.IntVar(&f.instances, "instances", 4, "inputs (in this process) sharing the group")
	fs.DurationVar(&f.interval, "interval", 5*time.Second, "stream_discovery_interval (5 s is the least allowed)")
	fs.DurationVar(&f.timeout, "timeout", 5*time.Minute, "longest wait for every shard to be leased")
	fs.DurationVar(&f.redisWindow, "redis-window", 30*time.Second, "how long the steady state's Redis calls are counted, for the streams and for one stream of as many shards (0: skip)")
	if err := fs.Parse(args); err != nil {
		return err
	}
	env, err := startEnv(ctx, envOptions{mock: true, redis: true})
	if err != nil {
		return err
	}
	defer env.Close()
	calls, err := newCallCounter(env.emu.Endpoint)
	if err != nil {
		return err
	}
	defer calls.Close()
	setAWSEnv()

	prefix := fmt.Sprintf("bench-disc-%d-", time.Now().UnixNano()%1_000_000)
	stops := make([]func(), 0, f.instances)
	defer func() {
		for _, stop := range stops {
			stop()
		}
	}()
	for i := range f.instances {
		stop, err := discoveryInstance(ctx, calls.URL, env.red.URL(), prefix+"*", discoveryGroup, fmt.Sprintf("i%d", i), f.interval)
		if err != nil {
			return err
		}
		stops = append(stops, stop)
	}
	cfg := checkpointer.DefaultConfig()
	cfg.RedisURL, cfg.Group = env.red.URL(), discoveryGroup
	ck, err := checkpointer.New(ctx, cfg, nil, nil)
	if err != nil {
		return err
	}
	defer ck.Close()

	time.Sleep(f.interval) // the group lists once before the streams come
	fmt.Fprintf(os.Stderr, "bench discovery: creating %d streams of %d shards...\n", f.streams, f.shards)
	before := calls.snapshot()
	active := map[string]time.Time{}
	var mu sync.Mutex
	var wg sync.WaitGroup
	sem := make(chan struct{}, 8)
	var createErr error
	for i := range f.streams {
		wg.Add(1)
		sem <- struct{}{}
		go func() {
			defer func() { <-sem; wg.Done() }()
			arn, err := env.emu.CreateStream(ctx, fmt.Sprintf("%s%03d", prefix, i), f.shards)
			mu.Lock()
			defer mu.Unlock()
			if err != nil {
				createErr = err
				return
			}
			active[arn] = time.Now()
		}()
	}
	wg.Wait()
	if createErr != nil {
		return createErr
	}
	leased := map[string]time.Duration{}
	deadline := time.Now().Add(f.timeout)
	for len(leased) < len(active) && time.Now().Before(deadline) {
		for arn, at := range active {
			if _, ok := leased[arn]; ok {
				continue
			}
			ls, err := ck.Stream(arn).Leases(ctx)
			if err != nil {
				return err
			}
			n := 0
			for _, l := range ls {
				if l.Owner != "" && !l.Expired {
					n++
				}
			}
			if n == f.shards {
				leased[arn] = time.Since(at)
			}
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(250 * time.Millisecond):
		}
	}
	after := calls.snapshot()
	printDiscovery(f, leased, len(active), before, after)
	if f.redisWindow <= 0 {
		return nil
	}
	rc := env.red.Client()
	defer rc.Close()
	many, err := steadyRedis(ctx, rc, f.streams*f.shards, f.redisWindow)
	if err != nil {
		return err
	}
	for _, stop := range stops {
		stop()
	}
	stops = stops[:0]
	one, err := oneStreamBaseline(ctx, f, env, calls.URL, prefix+"one", &stops)
	if err != nil {
		return err
	}
	printSteadyRedis(f, many, one)
	return nil
}

func printDiscovery(f discoveryFlags, leased map[string]time.Duration, created int, before, after map[string]int64) {
	d := slices.Sorted(maps.Values(leased))
	bound := 3 * f.interval
	fmt.Printf("\n%d streams of %d shards created while %d instances follow a pattern, stream_discovery_interval %v (kinesis-mock, in-process inputs)\n",
		f.streams, f.shards, f.instances, f.interval)
	if len(d) == 0 {
		fmt.Printf("no stream had every shard leased within %v: FAIL\n", f.timeout)
		return
	}
	at := func(q float64) time.Duration { return d[int(q*float64(len(d)-1)+0.5)].Round(10 * time.Millisecond) }
	fmt.Printf("ACTIVE to every shard leased: p50 %v, p95 %v, max %v (%d of %d streams)\n", at(0.5), at(0.95), d[len(d)-1].Round(10*time.Millisecond), len(d), created)
	var parts []string
	for _, op := range []string{"DescribeStreamSummary", "ListShards", "ListStreams"} {
		parts = append(parts, fmt.Sprintf("%s %d", op, after[op]-before[op]))
	}
	fmt.Printf("calls meanwhile: %s\n", strings.Join(parts, ", "))
	verdict := "PASS"
	if len(d) < created || d[len(d)-1] > bound {
		verdict = "FAIL"
	}
	fmt.Printf("bound 3 × interval = %v: max/bound %.2f: %s\n", bound, float64(d[len(d)-1])/float64(bound), verdict)
}

// discoveryInstance runs one input of the group, following pattern, with
// its readers polling slowly (hundreds of idle shards on one emulator).
func discoveryInstance(ctx context.Context, endpoint, redisURL, pattern, group, id string, interval time.Duration) (stop func(), err error) {
	b := service.NewStreamBuilder()
	b.SetLogger(slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn})))
	err = b.AddInputYAML(fmt.Sprintf(`
kinesis:
  streams: [ %q ]
  region: %s
  endpoint: %s
  stream_discovery_interval: %v
  start_position: trim_horizon
  checkpoint:
    redis: { url: %s }
    group: %s
  lease: { instance_id: %s }
  poll_interval: 1s
  idle_poll_interval: 5s
  shard_discovery_interval: 30s
`, pattern, testenv.Region, endpoint, interval, redisURL, group, id))
	if err != nil {
		return nil, err
	}
	if err := b.AddBatchConsumerFunc(func(context.Context, service.MessageBatch) error { return nil }); err != nil {
		return nil, err
	}
	s, err := b.Build()
	if err != nil {
		return nil, err
	}
	done := make(chan error, 1)
	go func() { done <- s.Run(ctx) }()
	return func() {
		_ = s.StopWithin(30 * time.Second)
		<-done
	}, nil
}
