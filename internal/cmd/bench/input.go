package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"os"
	"runtime/pprof"
	"sort"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
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
	rounds                int
	variant               string
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
	fs.IntVar(&f.rounds, "rounds", 6, "alternating rounds; in each, every side reads the whole stream")
	fs.StringVar(&f.variant, "variant", "", "YAML lines of input fields for a third side, measured in the same rounds against the defaults (e.g. 'auto_replay_nacks: false')")
	fs.StringVar(&f.cpuProfile, "cpuprofile", "", "write a CPU profile of the measured rounds to this file (samples labelled side=raw|plugin|variant)")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if f.rounds < 1 {
		return fmt.Errorf("-rounds %d: must be at least 1", f.rounds)
	}

	env, err := startEnv(ctx, envOptions{redis: true})
	if err != nil {
		return err
	}
	defer env.Close()
	emu, red := env.emu, env.red

	const stream = "bench-input"
	if _, err := emu.CreateStream(ctx, stream, f.shards); err != nil {
		return err
	}
	fmt.Fprintf(os.Stderr, "bench input: writing %d records...\n", f.records)
	if err := rawPut(ctx, emu.Endpoint, stream, f.records, outputFlags{size: f.size, concurrency: 16}); err != nil {
		return fmt.Errorf("filling the stream: %w", err)
	}

	// Warm both paths up (connections, code) on a small read.
	if err := rawRead(ctx, emu.Endpoint, stream, min(f.records, 2000), nil); err != nil {
		return fmt.Errorf("warming up the raw loop: %w", err)
	}
	warm := []string{""}
	if f.variant != "" {
		warm = append(warm, f.variant)
	}
	for i, fields := range warm {
		if err := inputRead(ctx, emu.Endpoint, red.URL(), fmt.Sprintf("warmup-%d", i), stream, min(f.records, 2000), f, fields, nil); err != nil {
			return fmt.Errorf("warming up the input: %w", err)
		}
	}

	rc := red.Client()
	defer rc.Close()
	// The sides: the raw loop, the plugin with its defaults and, with
	// -variant, the plugin with those fields, to weigh a setting.
	sides := []*inputSide{{name: "raw"}, {name: "plugin"}}
	if f.variant != "" {
		sides = append(sides, &inputSide{name: "variant", fields: f.variant})
	}
	stopProfile, err := startCPUProfile(f.cpuProfile)
	if err != nil {
		return err
	}
	defer stopProfile()
	// Rounds rotate which side goes first (ABBA... with two sides), so a
	// drift of the emulator or of the machine's load over the run hits
	// every side alike; each side's figures are the medians of its rounds.
	var cmds int64
	for r := range f.rounds {
		for j := range sides {
			s := sides[(r+j)%len(sides)]
			var err error
			// Labelled, so that a profile can be cut to one side:
			// go tool pprof -tagfocus side=plugin.
			pprof.Do(ctx, pprof.Labels("side", s.name), func(context.Context) {
				if s.name == "raw" {
					w := readingWindow{begin: time.Now()}
					err = s.add(measure(f.records, func() error {
						return rawRead(ctx, emu.Endpoint, stream, f.records, func(first bool, n int64) { w.mark(first, n) })
					}))
					s.windows = append(s.windows, w)
					return
				}
				var n int64
				n, err = s.readPlugin(ctx, rc, emu.Endpoint, red.URL(), fmt.Sprintf("%s-%d", s.name, r), stream, f)
				cmds += n
			})
			if err != nil {
				return fmt.Errorf("round %d, %s: %w", r+1, s.name, err)
			}
		}
	}
	stopProfile()

	raw, plugin := median(sides[0].rounds), median(sides[1].rounds)
	rawRead, pluginRead := median(sides[0].reading()), median(sides[1].reading())
	rawRead.peakHeap, pluginRead.peakHeap = raw.peakHeap, plugin.peakHeap
	fmt.Printf("input: %d records x %d B, %d shards, kinesalite, defaults (commit_period %v), medians of %d alternating rounds\n\n", f.records, f.size, f.shards, f.commitPeriod, f.rounds)
	fmt.Println("Start-up, from the start to the first records (for information: a new group waits 2s once before its first take):")
	fmt.Printf("%-22s %10s\n%-22s %10s\n%-22s %10s\n\n", "raw GetRecords", sides[0].startup().Round(time.Millisecond),
		"plugin", sides[1].startup().Round(time.Millisecond), "difference", (sides[1].startup() - sides[0].startup()).Round(time.Millisecond))
	printComparison("Reading, from the first records to the last (the target):", "raw GetRecords", "plugin", rawRead, pluginRead, 0.9, 1.3)
	for _, s := range sides[1:] {
		fmt.Printf("%-22s", "rounds "+s.name+"/raw")
		for i, m := range s.reading() {
			r := sides[0].reading()[i]
			fmt.Printf("  %.2fx %.2fx CPU", m.perSecond()/r.perSecond(), m.cpuPer100k()/r.cpuPer100k())
		}
		fmt.Println()
	}
	fmt.Println()
	printComparison("The whole run, start-up and stop included (for information):", "raw GetRecords", "plugin", raw, plugin, 0, 0)
	mem := []side{{"plugin", plugin}}
	if len(sides) > 2 {
		variant := median(sides[2].rounds)
		fmt.Println()
		printComparison(fmt.Sprintf("The plugin with %s, against its defaults:", strings.ReplaceAll(f.variant, "\n", "; ")),
			"plugin", "variant", plugin, variant, 0, 0)
		mem = append(mem, side{"variant", variant})
	}
	fmt.Println()
	// What the input may hold beyond the raw loop: each shard's delivered,
	// unacknowledged batches (the raw loop, like the input, holds one
	// response per shard while it reads).
	inFlight := uint64(f.shards * inputShardMaxInFlight * kinesisx.MaxGetRecordsLimit * f.size)
	printMemory("raw GetRecords", raw, inFlight, mem...)
	fmt.Println()

	// Redis, over every round of the plugin's default side.
	n := int64(f.records) * int64(f.rounds)
	fmt.Printf("Redis: %d commands over %d runs of the input (start-up and shutdown included): %.1f per 10k records\n",
		cmds, f.rounds*(len(sides)-1), float64(cmds)*10000/float64(n*int64(len(sides)-1)))
	var reading time.Duration
	var wcmds int64
	byCommand := map[string]int64{}
	for _, w := range sides[1].windows {
		reading += w.end.Sub(w.start)
		// Leave out the INFO calls of the sampling itself.
		wcmds += w.endCmds - w.startCmds - 2
		for name, n := range w.endStats {
			byCommand[name] += n - w.startStats[name]
		}
	}
	periods := reading.Seconds() / f.commitPeriod.Seconds()
	fmt.Printf("Redis while the plugin read (%v in all): %d commands, %.2f per shard per commit_period\n",
		reading.Round(time.Millisecond), wcmds, float64(wcmds)/float64(f.shards)/periods)
	fmt.Printf("  by command (Lua-internal calls included): %s\n", breakdown(byCommand))
	return nil
}

// inputShardMaxInFlight is the input's default shard_max_in_flight, which
// the bench runs with.
const inputShardMaxInFlight = 1

// inputSide is one side of the input part and its rounds.
type inputSide struct {
	name    string
	fields  string // YAML lines added to the input's config
	rounds  []measurement
	windows []readingWindow
}

func (s *inputSide) add(m measurement, err error) error {
	s.rounds = append(s.rounds, m)
	return err
}

// readPlugin measures one run of the input with a fresh group, and returns
// the Redis commands it sent.
func (s *inputSide) readPlugin(ctx context.Context, rc *redis.Client, endpoint, redisURL, group, stream string, f inputFlags) (int64, error) {
	before, err := redisCommands(ctx, rc)
	if err != nil {
		return 0, err
	}
	// The reading window runs from the first batch to the last record: it
	// leaves out start-up (leases, checkpoints) and shutdown (final
	// commits).
	w := readingWindow{begin: time.Now()}
	sample := func() int64 { n, _ := redisCommands(ctx, rc); return n }
	err = s.add(measure(f.records, func() error {
		return inputRead(ctx, endpoint, redisURL, group, stream, f.records, f, s.fields, func(first bool, n int64) {
			w.mark(first, n)
			if first {
				w.startCmds, w.startStats = sample(), commandStats(ctx, rc)
			} else {
				w.endCmds, w.endStats = sample(), commandStats(ctx, rc)
			}
		})
	}))
	s.windows = append(s.windows, w)
	if err != nil {
		return 0, err
	}
	after, err := redisCommands(ctx, rc)
	// The first INFO is counted in after (an INFO does not count itself),
	// and so are the window's four.
	return after - before - 1 - 4, err
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

// breakdown lists the commands called, but for the bench's own INFO.
func breakdown(calls map[string]int64) string {
	var parts []string
	for name, n := range calls {
		if n > 0 && name != "info" {
			parts = append(parts, fmt.Sprintf("%s %d", name, n))
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
// records are read in all. mark, when set, is called as inputRead's is.
func rawRead(ctx context.Context, endpoint, stream string, n int, mark func(first bool, records int64)) error {
	if mark == nil {
		mark = func(bool, int64) {}
	}
	var firstOnce, lastOnce sync.Once
	c := testenv.KinesisClient(endpoint, func(o *kinesis.Options) { o.Retryer = aws.NopRetryer{} })
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
					got := total.Add(int64(len(out.Records)))
					if len(out.Records) > 0 {
						firstOnce.Do(func() { mark(true, got) })
					}
					if got >= int64(n) {
						lastOnce.Do(func() { mark(false, got) })
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
// checkpoints) and the given extra fields into a consumer that counts,
// until n records arrived.
// mark, when set, is called at the first batch (true) and once n records
// arrived (false), with the records arrived so far.
func inputRead(ctx context.Context, endpoint, redisURL, group, stream string, n int, f inputFlags, fields string, mark func(first bool, records int64)) error {
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
  %s
`, stream, testenv.Region, endpoint, testenv.AccessKey, testenv.SecretKey, redisURL, group, f.commitPeriod, strings.ReplaceAll(fields, "\n", "\n  ")))
	if err != nil {
		return err
	}
	var total atomic.Int64
	done := make(chan struct{})
	var once, firstOnce sync.Once
	if mark == nil {
		mark = func(bool, int64) {}
	}
	if err := b.AddBatchConsumerFunc(func(_ context.Context, batch service.MessageBatch) error {
		got := total.Add(int64(len(batch)))
		firstOnce.Do(func() { mark(true, got) })
		if got >= int64(n) {
			once.Do(func() { mark(false, got); close(done) })
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
