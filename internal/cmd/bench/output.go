package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"strings"
	"sync"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/kinesis"
	"github.com/aws/aws-sdk-go-v2/service/kinesis/types"
	"github.com/redpanda-data/benthos/v4/public/service"

	_ "github.com/redpanda-data/benthos/v4/public/components/pure"

	"github.com/connect-kinesis/connect-kinesis/internal/awsconf"
	"github.com/connect-kinesis/connect-kinesis/internal/kinesisx"
	"github.com/connect-kinesis/connect-kinesis/internal/testenv"
	_ "github.com/connect-kinesis/connect-kinesis/plugins/output"
)

func init() {
	parts["output"] = part{
		summary: "the kinesis output (unordered and ordered, plain and aggregated) vs a raw aws-sdk-go-v2 PutRecords loop, on kinesalite",
		run:     runOutput,
	}
}

type outputFlags struct {
	records, size, shards, concurrency int
	rounds                             int
	cpuProfile                         string
	batching                           string
	process                            processFlags
}

func runOutput(ctx context.Context, args []string) error {
	var f outputFlags
	fs := flag.NewFlagSet("output", flag.ContinueOnError)
	fs.IntVar(&f.records, "n", 200000, "records to write on each side")
	fs.IntVar(&f.size, "size", 200, "bytes of data per record")
	fs.IntVar(&f.shards, "shards", 4, "shards of each stream")
	fs.IntVar(&f.concurrency, "concurrency", 64, "PutRecords requests in flight (max_in_flight of the plugin)")
	fs.IntVar(&f.rounds, "rounds", 4, "rotating rounds each side's records are split into")
	fs.StringVar(&f.cpuProfile, "cpuprofile", "", "write a CPU profile of the measured rounds (every side) to this file")
	fs.StringVar(&f.batching, "batching", "", "the plugin sides' batching field, e.g. '{}' to compare without the output's default batching (the bench feeds batches of 500)")
	f.process.register(fs)
	if err := fs.Parse(args); err != nil {
		return err
	}
	f.process.shards = f.shards
	if f.rounds < 1 || f.records < f.rounds {
		return fmt.Errorf("-rounds %d: must be at least 1 and at most -n (%d)", f.rounds, f.records)
	}

	env, err := startEnv(ctx, envOptions{})
	if err != nil {
		return err
	}
	defer env.Close()
	emu := env.emu
	if f.process.only == "process" {
		return runProcessCase(ctx, emu, f.process, f.size, f.concurrency)
	}
	// The plugin's sides: unordered (the raw loop's match) and ordered (the
	// default), each plain and aggregated.
	modes := []pluginMode{
		{name: "plugin unordered", fields: "preserve_order: false"},
		{name: "plugin ordered", fields: "preserve_order: true"},
		{name: "unordered aggregated", fields: "preserve_order: false\naggregation: {enabled: true}"},
		{name: "ordered aggregated", fields: "preserve_order: true\naggregation: {enabled: true}"},
	}
	streams := []string{"bench-raw", "bench-generate"}
	for i := range modes {
		modes[i].stream = fmt.Sprintf("bench-plugin-%d", i)
		streams = append(streams, modes[i].stream)
	}
	for _, s := range streams {
		if _, err := emu.CreateStream(ctx, s, f.shards); err != nil {
			return err
		}
	}
	// The plugin reads credentials from the default chain.
	setAWSEnv()

	// A short warm-up of every path so none pays for first connections and
	// code paths in its measurement.
	if err := rawPut(ctx, emu.Endpoint, "bench-raw", min(f.records, 5000), f); err != nil {
		return fmt.Errorf("warming up the raw loop: %w", err)
	}
	for _, m := range modes {
		if err := pluginPut(ctx, emu.Endpoint, m, min(f.records, 5000), f); err != nil {
			return fmt.Errorf("warming up the plugin (%s): %w", m.name, err)
		}
	}

	stopProfile, err := startCPUProfile(f.cpuProfile)
	if err != nil {
		return err
	}
	defer stopProfile()
	// Rounds rotate which side goes first, so a drift of the emulator or of
	// the machine's load over the run hits every side alike.
	// Each side's figures are the medians of its rounds, so one round
	// disturbed by the machine or the emulator does not move them.
	var (
		rawRounds    []measurement
		pluginRounds = make([][]measurement, len(modes))
		generate     measurement
	)
	per := f.records / f.rounds
	sides := []func() error{func() error {
		m, err := measure(per, func() error { return rawPut(ctx, emu.Endpoint, "bench-raw", per, f) })
		rawRounds = append(rawRounds, m)
		return err
	}}
	for i, mode := range modes {
		sides = append(sides, func() error {
			m, err := measure(per, func() error { return pluginPut(ctx, emu.Endpoint, mode, per, f) })
			pluginRounds[i] = append(pluginRounds[i], m)
			return err
		})
	}
	for r := range f.rounds {
		for j := range sides {
			if err := sides[(r+j)%len(sides)](); err != nil {
				return fmt.Errorf("round %d: %w", r+1, err)
			}
		}
	}
	stopProfile()
	raw := median(rawRounds)
	plugin := make([]measurement, len(modes))
	for i := range modes {
		plugin[i] = median(pluginRounds[i])
	}
	generate, err = measure(per*f.rounds, func() error { return generatePut(ctx, emu.Endpoint, "bench-generate", per*f.rounds, f) })
	if err != nil {
		return fmt.Errorf("generate pipeline: %w", err)
	}
	printComparison(
		fmt.Sprintf("output: %d records x %d B, %d shards, kinesalite, %d requests in flight, medians of %d rotating rounds of %d", per*f.rounds, f.size, f.shards, f.concurrency, f.rounds, per),
		"raw SDK", modes[0].name, raw, plugin[0], 0.95, 1.2)
	fmt.Printf("%-22s", "rounds unordered/raw")
	for r := range rawRounds {
		fmt.Printf("  %.2fx %.2fx CPU", pluginRounds[0][r].perSecond()/rawRounds[r].perSecond(), pluginRounds[0][r].cpuPer100k()/rawRounds[r].cpuPer100k())
	}
	fmt.Print("\n\n")
	printComparison("Ordered (preserve_order: true, the default) against unordered:",
		modes[0].name, modes[1].name, plugin[0], plugin[1], 0.8, 1.5)
	fmt.Println()
	printComparison("The same with aggregation:",
		modes[2].name, modes[3].name, plugin[2], plugin[3], 0.8, 1.5)
	fmt.Println()
	fmt.Println("The same through a whole pipeline (generate + Bloblang -> kinesis, defaults), for information:")
	fmt.Printf("%-22s %12.0f %14.3f %10s   (%.2fx raw rec/s, %.2fx raw CPU)\n", "generate -> plugin",
		generate.perSecond(), generate.cpuPer100k(), generate.wall.Round(time.Millisecond),
		generate.perSecond()/raw.perSecond(), generate.cpuPer100k()/raw.cpuPer100k())
	fmt.Println()
	mem := []side{{"generate -> plugin", generate}}
	for i, m := range modes {
		mem = append(mem, side{m.name, plugin[i]})
	}
	printMemory("raw SDK", raw, uint64(f.concurrency*kinesisx.MaxPutRecordsCount*f.size), mem...)
	fmt.Println()
	split := f
	split.records, split.rounds, split.batching = min(f.records, 60000), 3, ""
	if err := splitCase(ctx, emu.Endpoint, emu.CreateStream, split); err != nil {
		return fmt.Errorf("split case: %w", err)
	}
	fmt.Println()
	return runProcessCase(ctx, emu, f.process, f.size, f.concurrency)
}

// pluginMode is one configuration of the plugin on the bench.
type pluginMode struct {
	name   string
	fields string // YAML lines added to the output's config
	stream string
}

// payload is the record data both sides send: size bytes.
func payload(size int) []byte { return []byte(strings.Repeat("x", size)) }

// rawPut is the baseline: the plain SDK, batches of 500 records, concurrency
// workers, re-sending refused entries (kinesalite refuses none).
func rawPut(ctx context.Context, endpoint, stream string, n int, f outputFlags) error {
	// The same client set-up as the plugin's (HTTP transport, no SDK
	// retries), so the comparison is of what the plugin adds.
	settings := awsconf.Settings{Region: testenv.Region, Endpoint: endpoint, ID: testenv.AccessKey, Secret: testenv.SecretKey}
	cfg, err := settings.Load(ctx)
	if err != nil {
		return err
	}
	c := settings.KinesisClient(cfg)
	data := payload(f.size)
	return inBatches(n, f.concurrency, func(start, end int) error {
		entries := make([]types.PutRecordsRequestEntry, 0, end-start)
		for i := start; i < end; i++ {
			entries = append(entries, types.PutRecordsRequestEntry{Data: data, PartitionKey: aws.String(fmt.Sprint(i % kinesisx.MaxPutRecordsCount))})
		}
		for len(entries) > 0 {
			out, err := c.PutRecords(ctx, &kinesis.PutRecordsInput{StreamName: aws.String(stream), Records: entries})
			if err != nil {
				return err
			}
			var again []types.PutRecordsRequestEntry
			for i, r := range out.Records {
				if r.ErrorCode != nil {
					again = append(again, entries[i])
				}
			}
			entries = again
		}
		return nil
	})
}

// inBatches calls put for each span [start, end) of n records, at most one
// PutRecords request long, from workers goroutines, and returns every error
// joined. A worker that fails puts nothing more (it drains the spans left,
// so the feeder never blocks on it).
func inBatches(n, workers int, put func(start, end int) error) error {
	spans := make(chan int)
	var (
		wg   sync.WaitGroup
		mu   sync.Mutex
		errs error
	)
	for range workers {
		wg.Go(func() {
			failed := false
			for start := range spans {
				if failed {
					continue
				}
				if err := put(start, min(start+kinesisx.MaxPutRecordsCount, n)); err != nil {
					mu.Lock()
					errs = errors.Join(errs, err)
					mu.Unlock()
					failed = true
				}
			}
		})
	}
	for start := 0; start < n; start += kinesisx.MaxPutRecordsCount {
		spans <- start
	}
	close(spans)
	wg.Wait()
	return errs
}

// pluginPut writes n records through a Benthos stream into the kinesis
// output, fed like the raw loop: batches of 500 messages sharing one payload,
// from concurrency goroutines. It measures the output, not the cost of making
// messages up.
func pluginPut(ctx context.Context, endpoint string, mode pluginMode, n int, f outputFlags) error {
	b := service.NewStreamBuilder()
	if err := b.SetLoggerYAML("level: warn"); err != nil {
		return err
	}
	fields := "  " + strings.ReplaceAll(mode.fields, "\n", "\n  ")
	if f.batching != "" {
		fields += "\n  batching: " + f.batching
	}
	err := b.AddOutputYAML(fmt.Sprintf(`
kinesis:
  stream: %s
  endpoint: %s
  partition_key: ${! batch_index() }
  max_in_flight: %d
%s
`, mode.stream, endpoint, f.concurrency, fields))
	if err != nil {
		return err
	}
	produce, err := b.AddBatchProducerFunc()
	if err != nil {
		return err
	}
	s, err := b.Build()
	if err != nil {
		return err
	}
	runErr := make(chan error, 1)
	go func() { runErr <- s.Run(ctx) }()

	data := payload(f.size)
	firstErr := inBatches(n, f.concurrency, func(start, end int) error {
		batch := make(service.MessageBatch, 0, end-start)
		for i := start; i < end; i++ {
			batch = append(batch, service.NewMessage(data))
		}
		return produce(ctx, batch)
	})
	if err := s.StopWithin(30 * time.Second); err != nil {
		firstErr = errors.Join(firstErr, err)
	}
	if err := <-runErr; err != nil && !errors.Is(err, context.Canceled) {
		firstErr = errors.Join(firstErr, err)
	}
	return firstErr
}

// generatePut writes n records through a whole pipeline: generate (batches
// of 500, as the raw loop) -> kinesis.
func generatePut(ctx context.Context, endpoint, stream string, n int, f outputFlags) error {
	b := service.NewStreamBuilder()
	err := b.SetYAML(fmt.Sprintf(`
input:
  generate:
    count: %d
    batch_size: %d
    interval: ""
    mapping: root = %q
output:
  kinesis:
    stream: %s
    endpoint: %s
    partition_key: ${! batch_index() }
    max_in_flight: %d
logger:
  level: warn
`, n, kinesisx.MaxPutRecordsCount, string(payload(f.size)), stream, endpoint, f.concurrency))
	if err != nil {
		return err
	}
	s, err := b.Build()
	if err != nil {
		return err
	}
	return s.Run(ctx)
}
