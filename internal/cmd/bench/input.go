package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"os"
	"sort"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/aws/aws-sdk-go-v2/service/kinesis"
	"github.com/aws/aws-sdk-go-v2/service/kinesis/types"
	"github.com/redis/go-redis/v9"
	"github.com/redpanda-data/benthos/v4/public/service"

	"github.com/connect-kinesis/connect-kinesis/internal/kinesisx"
	"github.com/connect-kinesis/connect-kinesis/internal/testenv"
	_ "github.com/connect-kinesis/connect-kinesis/plugins/input"
)

func init() {
	parts["input"] = part{
		summary: "the kinesis input (Redis checkpoints on) vs a raw GetRecords loop, on kinesalite",
		run:     runInput,
	}
}

type inputFlags struct {
	records, size, shards int
	commitPeriod          time.Duration
	cpuProfile            string
}

func runInput(ctx context.Context, args []string) error {
	var f inputFlags
	fs := flag.NewFlagSet("input", flag.ContinueOnError)
	fs.IntVar(&f.records, "n", 100000, "records in the stream, read by each side")
	fs.IntVar(&f.size, "size", 200, "bytes of data per record")
	fs.IntVar(&f.shards, "shards", 4, "shards of the stream")
	fs.DurationVar(&f.commitPeriod, "commit-period", 5*time.Second, "checkpoint.commit_period of the input")
	fs.StringVar(&f.cpuProfile, "cpuprofile", "", "write a CPU profile of the input's run to this file")
	if err := fs.Parse(args); err != nil {
		return err
	}

	emu, err := testenv.StartKinesalite(ctx)
	if err != nil {
		return fmt.Errorf("starting kinesalite: %w", err)
	}
	defer emu.Close()
	red, err := testenv.StartRedis(ctx, testenv.RedisOptions{})
	if err != nil {
		return fmt.Errorf("starting redis-server: %w", err)
	}
	defer red.Close()

	const stream = "bench-input"
	if _, err := emu.CreateStream(ctx, stream, f.shards); err != nil {
		return err
	}
	fmt.Fprintf(os.Stderr, "bench input: writing %d records...\n", f.records)
	if err := rawPut(ctx, emu.Endpoint, stream, f.records, outputFlags{size: f.size, concurrency: 16}); err != nil {
		return fmt.Errorf("filling the stream: %w", err)
	}

	// Warm both paths up (connections, code) on a small read.
	if err := rawRead(ctx, emu.Endpoint, stream, min(f.records, 2000)); err != nil {
		return fmt.Errorf("warming up the raw loop: %w", err)
	}
	if err := inputRead(ctx, emu.Endpoint, red.URL(), "warmup", stream, min(f.records, 2000), f, nil); err != nil {
		return fmt.Errorf("warming up the input: %w", err)
	}

	raw, err := measure(f.records, func() error { return rawRead(ctx, emu.Endpoint, stream, f.records) })
	if err != nil {
		return fmt.Errorf("raw loop: %w", err)
	}
	rc := red.Client()
	defer rc.Close()
	cmdsBefore, err := redisCommands(ctx, rc)
	if err != nil {
		return err
	}
	stopProfile, err := startCPUProfile(f.cpuProfile)
	if err != nil {
		return err
	}
	defer stopProfile()
	// The reading window runs from the first batch to the last record: it
	// leaves out start-up (leases, checkpoints) and shutdown (final commits).
	var window readingWindow
	sample := func() int64 { n, _ := redisCommands(ctx, rc); return n }
	plugin, err := measure(f.records, func() error {
		return inputRead(ctx, emu.Endpoint, red.URL(), "bench", stream, f.records, f, func(first bool) {
			if first {
				window.startCmds, window.start = sample(), time.Now()
				window.startStats = commandStats(ctx, rc)
			} else {
				window.endCmds, window.end = sample(), time.Now()
				window.endStats = commandStats(ctx, rc)
			}
		})
	})
	stopProfile()
	if err != nil {
		return fmt.Errorf("input: %w", err)
	}
	cmdsAfter, err := redisCommands(ctx, rc)
	if err != nil {
		return err
	}
	// The two INFO calls count themselves.
	cmds := cmdsAfter - cmdsBefore - 1

	printComparison(
		fmt.Sprintf("input: %d records x %d B, %d shards, kinesalite, defaults (commit_period %v)", f.records, f.size, f.shards, f.commitPeriod),
		"raw GetRecords", "plugin", raw, plugin, 0.9, 1.3)
	fmt.Println()
	fmt.Printf("Redis: %d commands for the whole run (start-up and shutdown included): %.1f per 10k records\n",
		cmds, float64(cmds)*10000/float64(f.records))
	// Leave out the INFO calls of the sampling itself.
	wcmds := window.endCmds - window.startCmds - 2
	periods := window.end.Sub(window.start).Seconds() / f.commitPeriod.Seconds()
	fmt.Printf("Redis while reading (%v): %d commands, %.2f per shard per commit_period\n",
		window.end.Sub(window.start).Round(time.Millisecond), wcmds, float64(wcmds)/float64(f.shards)/periods)
	fmt.Printf("  by command (Lua-internal calls included): %s\n", window.breakdown())
	return nil
}

type readingWindow struct {
	start, end           time.Time
	startCmds, endCmds   int64
	startStats, endStats map[string]int64
}

// commandStats is calls per command from INFO commandstats; commands run
// inside Lua scripts count there (and in total_commands_processed) too.
func commandStats(ctx context.Context, c *redis.Client) map[string]int64 {
	info, err := c.Info(ctx, "commandstats").Result()
	out := map[string]int64{}
	if err != nil {
		return out
	}
	for _, line := range strings.Split(info, "\n") {
		name, rest, ok := strings.Cut(strings.TrimSpace(line), ":calls=")
		if !ok {
			continue
		}
		calls, _, _ := strings.Cut(rest, ",")
		n, _ := strconv.ParseInt(calls, 10, 64)
		out[strings.TrimPrefix(name, "cmdstat_")] = n
	}
	return out
}

func (w readingWindow) breakdown() string {
	var parts []string
	for name, n := range w.endStats {
		if d := n - w.startStats[name]; d > 0 && name != "info" {
			parts = append(parts, fmt.Sprintf("%s %d", name, d))
		}
	}
	sort.Strings(parts)
	return strings.Join(parts, ", ")
}

// redisCommands is the server's total_commands_processed.
func redisCommands(ctx context.Context, c *redis.Client) (int64, error) {
	info, err := c.Info(ctx, "stats").Result()
	if err != nil {
		return 0, fmt.Errorf("reading redis stats: %w", err)
	}
	for _, line := range strings.Split(info, "\n") {
		if v, ok := strings.CutPrefix(strings.TrimSpace(line), "total_commands_processed:"); ok {
			return strconv.ParseInt(v, 10, 64)
		}
	}
	return 0, errors.New("reading redis stats: no total_commands_processed")
}

// rawRead is the baseline: one goroutine per shard, GetRecords at most once
// per poll interval (the service's 5 reads/s/shard, as the input), until n
// records are read in all.
func rawRead(ctx context.Context, endpoint, stream string, n int) error {
	c := kinesis.New(kinesis.Options{
		Region:       testenv.Region,
		BaseEndpoint: aws.String(endpoint),
		Credentials:  credentials.NewStaticCredentialsProvider(testenv.AccessKey, testenv.SecretKey, ""),
		Retryer:      aws.NopRetryer{},
	})
	shards, err := kinesisx.ListAllShards(ctx, c, stream)
	if err != nil {
		return err
	}
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	var (
		total    atomic.Int64
		wg       sync.WaitGroup
		mu       sync.Mutex
		firstErr error
	)
	for _, s := range shards {
		wg.Add(1)
		go func() {
			defer wg.Done()
			err := func() error {
				it, err := c.GetShardIterator(ctx, &kinesis.GetShardIteratorInput{
					StreamName: aws.String(stream), ShardId: s.ShardId, ShardIteratorType: types.ShardIteratorTypeTrimHorizon,
				})
				if err != nil {
					return err
				}
				iter := it.ShardIterator
				for iter != nil {
					next := time.Now().Add(kinesisx.MinPollInterval)
					out, err := c.GetRecords(ctx, &kinesis.GetRecordsInput{ShardIterator: iter, Limit: aws.Int32(kinesisx.MaxGetRecordsLimit)})
					if err != nil {
						return err
					}
					if total.Add(int64(len(out.Records))) >= int64(n) {
						cancel()
						return nil
					}
					iter = out.NextShardIterator
					select {
					case <-time.After(time.Until(next)):
					case <-ctx.Done():
						return nil
					}
				}
				return nil
			}()
			if err != nil && ctx.Err() == nil {
				mu.Lock()
				firstErr = errors.Join(firstErr, err)
				mu.Unlock()
				cancel()
			}
		}()
	}
	wg.Wait()
	return firstErr
}

// inputRead runs the kinesis input with its defaults (a fresh group, Redis
// checkpoints) into a consumer that counts, until n records arrived.
// mark, when set, is called at the first batch (true) and once n records
// arrived (false).
func inputRead(ctx context.Context, endpoint, redisURL, group, stream string, n int, f inputFlags, mark func(first bool)) error {
	b := service.NewStreamBuilder()
	if err := b.SetLoggerYAML("level: warn"); err != nil {
		return err
	}
	err := b.AddInputYAML(fmt.Sprintf(`
kinesis:
  streams: [ %s ]
  region: %s
  endpoint: %s
  credentials: { id: %s, secret: %s }
  checkpoint:
    redis: { url: %s }
    group: %s
    commit_period: %v
`, stream, testenv.Region, endpoint, testenv.AccessKey, testenv.SecretKey, redisURL, group, f.commitPeriod))
	if err != nil {
		return err
	}
	var total atomic.Int64
	done := make(chan struct{})
	var once, firstOnce sync.Once
	if mark == nil {
		mark = func(bool) {}
	}
	if err := b.AddBatchConsumerFunc(func(_ context.Context, batch service.MessageBatch) error {
		firstOnce.Do(func() { mark(true) })
		if total.Add(int64(len(batch))) >= int64(n) {
			once.Do(func() { mark(false); close(done) })
		}
		return nil
	}); err != nil {
		return err
	}
	s, err := b.Build()
	if err != nil {
		return err
	}
	runErr := make(chan error, 1)
	go func() { runErr <- s.Run(ctx) }()
	select {
	case <-done:
	case err := <-runErr:
		return fmt.Errorf("the stream ended after %d records: %v", total.Load(), err)
	case <-ctx.Done():
		return ctx.Err()
	}
	if err := s.StopWithin(30 * time.Second); err != nil {
		return err
	}
	if err := <-runErr; err != nil && !errors.Is(err, context.Canceled) {
		return err
	}
	return nil
}
