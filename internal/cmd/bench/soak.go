package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"math"
	"os"
	"runtime/pprof"
	"sync"
	"sync/atomic"
	"time"

	"github.com/redpanda-data/benthos/v4/public/service"

	"github.com/connect-kinesis/connect-kinesis/internal/kinesisx"
)

func init() {
	parts["soak"] = part{
		summary: "a million records through the output (generate -> kinesis) and the input (kinesis -> drop): heap in use at 10%...100%, flat or not",
		run:     runSoak,
	}
	// The output side counts records where they enter the output, with
	// this processor: the generate input offers no other place to see them.
	err := service.RegisterBatchProcessor(soakCountProcessor, service.NewConfigSpec().
		Summary("Bench only: reports each batch to the soak part before it reaches the output."),
		func(*service.ParsedConfig, *service.Resources) (service.BatchProcessor, error) {
			return soakCounter{}, nil
		})
	if err != nil {
		panic(err)
	}
}

const soakCountProcessor = "bench_soak_count"

// soakSeen is called by the bench_soak_count processor with each batch's
// size; the output side sets it before its stream runs.
var soakSeen atomic.Pointer[func(n int)]

type soakCounter struct{}

func (soakCounter) ProcessBatch(_ context.Context, b service.MessageBatch) ([]service.MessageBatch, error) {
	if f := soakSeen.Load(); f != nil {
		(*f)(len(b))
	}
	return []service.MessageBatch{b}, nil
}

func (soakCounter) Close(context.Context) error { return nil }

type soakFlags struct {
	records, size, shards int
	steps                 int
	tolerance             float64
	memProfile            string
}

func runSoak(ctx context.Context, args []string) error {
	var f soakFlags
	fs := flag.NewFlagSet("soak", flag.ContinueOnError)
	fs.IntVar(&f.records, "n", 1000000, "records streamed through each side")
	fs.IntVar(&f.size, "size", 200, "bytes of data per record")
	fs.IntVar(&f.shards, "shards", 8, "shards of the stream")
	fs.IntVar(&f.steps, "steps", 10, "heap samples per side, at equal shares of the records")
	fs.StringVar(&f.memProfile, "memprofile", "", "write a heap profile of the input side at each sample to `PREFIX`-<share>.pprof (read with go tool pprof -sample_index=inuse_space)")
	fs.Float64Var(&f.tolerance, "tolerance", 0.10, "largest change of heap in use from the first sample to any later one that counts as flat")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if f.steps < 2 || f.records < f.steps {
		return fmt.Errorf("-steps %d: must be at least 2 and at most -n (%d)", f.steps, f.records)
	}

	env, err := startEnv(ctx, envOptions{redis: true})
	if err != nil {
		return err
	}
	defer env.Close()
	emu, red := env.emu, env.red
	const stream = "bench-soak"
	if _, err := emu.CreateStream(ctx, stream, f.shards); err != nil {
		return err
	}
	setAWSEnv()

	// The output fills the stream the input then reads, so the two sides
	// run one after the other and each has the process to itself.
	fmt.Fprintf(os.Stderr, "bench soak: output, %d records...\n", f.records)
	out, err := soakOutput(ctx, emu.Endpoint, stream, f)
	if err != nil {
		return fmt.Errorf("output side: %w", err)
	}
	// More records than the input reads, so that at its last sample it is
	// still reading, as at its first, rather than idle at the stream's end
	// with nothing buffered.
	if err := rawPut(ctx, emu.Endpoint, stream, f.records/f.steps, outputFlags{size: f.size, concurrency: 16}); err != nil {
		return fmt.Errorf("topping the stream up: %w", err)
	}
	fmt.Fprintf(os.Stderr, "bench soak: input, %d records...\n", f.records)
	in, err := soakInput(ctx, emu.Endpoint, red.URL(), stream, f)
	if err != nil {
		return fmt.Errorf("input side: %w", err)
	}

	fmt.Printf("soak: %d records x %d B, %d shards, kinesalite, defaults; heap in use after a GC (MiB) at each share of the records\n",
		f.records, f.size, f.shards)
	header := fmt.Sprintf("%-24s", "")
	for i := 1; i <= f.steps; i++ {
		header += fmt.Sprintf(" %7d%%", i*100/f.steps)
	}
	fmt.Println(header)
	for _, side := range []soakResult{out, in} {
		heap, alloc, rss := fmt.Sprintf("%-24s", side.name+" heap in use"), fmt.Sprintf("%-24s", side.name+" heap objects"), fmt.Sprintf("%-24s", side.name+" RSS")
		for _, s := range side.samples {
			heap += fmt.Sprintf(" %8.1f", mib(s.heapInuse))
			alloc += fmt.Sprintf(" %8.1f", mib(s.heapAlloc))
			rss += fmt.Sprintf(" %8.1f", mib(s.rss))
		}
		fmt.Println(heap)
		fmt.Println(alloc)
		fmt.Println(rss)
	}
	fmt.Println()
	for _, side := range []soakResult{out, in} {
		fmt.Printf("%-6s %d records in %v (%.0f records/s): %s\n",
			side.name, f.records, side.wall.Round(time.Second), float64(f.records)/side.wall.Seconds(),
			flatness(side.samples, f.tolerance, f.steps))
	}
	return nil
}

// flatness compares every later sample's heap in use with the first one's
// and says whether all of them are within tolerance of it: one sample
// beyond it, higher or lower, and the line is not flat.
func flatness(samples []heapSample, tolerance float64, steps int) string {
	first := samples[0].heapInuse
	lo, hi, off := 0.0, 0.0, 0
	for _, s := range samples[1:] {
		change := float64(s.heapInuse)/float64(first) - 1
		lo, hi = min(lo, change), max(hi, change)
		if math.Abs(change) > tolerance {
			off++
		}
	}
	last := float64(samples[len(samples)-1].heapInuse)/float64(first) - 1
	summary := fmt.Sprintf("heap in use %.1f MiB at %d%%; the %d later samples %+.1f%% to %+.1f%% of it, %+.1f%% at 100%%",
		mib(first), 100/steps, len(samples)-1, lo*100, hi*100, last*100)
	if off == 0 {
		return fmt.Sprintf("%s: flat (every sample within %.0f%% of the first)", summary, tolerance*100)
	}
	return fmt.Sprintf("%s: NOT FLAT (%d of %d samples more than %.0f%% off the first)", summary, off, len(samples)-1, tolerance*100)
}

// soakResult is one side's run: its heap samples and wall time.
type soakResult struct {
	name    string
	samples []heapSample
	wall    time.Duration
}

// sampler takes a heap sample each time the count passes the next of
// steps equal shares of total. It is safe for concurrent use.
type sampler struct {
	mu      sync.Mutex
	total   int
	steps   int
	count   int
	samples []heapSample
	done    chan struct{}
	// onSample, if set, is called under the lock right after each sample,
	// with the sample's share of the records in percent.
	onSample func(percent int)
}

func newSampler(total, steps int) *sampler {
	return &sampler{total: total, steps: steps, done: make(chan struct{})}
}

// seen is how many records were counted so far.
func (s *sampler) seen() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.count
}

func (s *sampler) add(n int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if len(s.samples) == s.steps {
		return
	}
	s.count += n
	// Sampling under the lock holds the pipeline's other goroutines that
	// report in the meantime, not the ones already past: a short pause.
	for len(s.samples) < s.steps && s.count >= s.total*(len(s.samples)+1)/s.steps {
		s.samples = append(s.samples, sampleHeap(s.count))
		if s.onSample != nil {
			s.onSample(len(s.samples) * 100 / s.steps)
		}
	}
	if len(s.samples) == s.steps {
		close(s.done)
	}
}

// soakOutput runs generate -> bench_soak_count -> kinesis (defaults) for
// f.records records, sampling the heap while records flow.
func soakOutput(ctx context.Context, endpoint, stream string, f soakFlags) (soakResult, error) {
	smp := newSampler(f.records, f.steps)
	seen := smp.add
	soakSeen.Store(&seen)
	defer soakSeen.Store(nil)

	b := service.NewStreamBuilder()
	err := b.SetYAML(fmt.Sprintf(`
input:
  generate:
    count: %d
    batch_size: %d
    interval: ""
    mapping: root = %q
pipeline:
  processors:
    - %s: {}
output:
  kinesis:
    stream: %s
    endpoint: %s
    partition_key: ${! batch_index() }
logger:
  level: warn
`, f.records, kinesisx.MaxPutRecordsCount, string(payload(f.size)), soakCountProcessor, stream, endpoint))
	if err != nil {
		return soakResult{}, err
	}
	s, err := b.Build()
	if err != nil {
		return soakResult{}, err
	}
	start := time.Now()
	if err := s.Run(ctx); err != nil {
		return soakResult{}, err
	}
	wall := time.Since(start)
	select {
	case <-smp.done:
	default:
		return soakResult{}, fmt.Errorf("the stream ended after %d records", smp.seen())
	}
	return soakResult{name: "output", samples: smp.samples, wall: wall}, nil
}

// soakInput reads f.records records with the kinesis input (defaults,
// Redis checkpoints) into a consumer that drops them, sampling the heap as
// they arrive.
func soakInput(ctx context.Context, endpoint, redisURL, stream string, f soakFlags) (soakResult, error) {
	smp := newSampler(f.records, f.steps)
	if f.memProfile != "" {
		smp.onSample = func(percent int) { writeHeapProfile(fmt.Sprintf("%s-%d.pprof", f.memProfile, percent)) }
	}
	b := service.NewStreamBuilder()
	if err := b.SetLoggerYAML("level: warn"); err != nil {
		return soakResult{}, err
	}
	err := b.AddInputYAML(fmt.Sprintf(`
kinesis:
  streams: [ %s ]
  endpoint: %s
  checkpoint:
    redis: { url: %s }
    group: soak
`, stream, endpoint, redisURL))
	if err != nil {
		return soakResult{}, err
	}
	if err := b.AddBatchConsumerFunc(func(_ context.Context, batch service.MessageBatch) error {
		smp.add(len(batch))
		return nil
	}); err != nil {
		return soakResult{}, err
	}
	s, err := b.Build()
	if err != nil {
		return soakResult{}, err
	}
	start := time.Now()
	runErr := make(chan error, 1)
	go func() { runErr <- s.Run(ctx) }()
	select {
	case <-smp.done:
	case err := <-runErr:
		return soakResult{}, fmt.Errorf("the stream ended after %d records: %v", smp.seen(), err)
	case <-ctx.Done():
		return soakResult{}, ctx.Err()
	}
	wall := time.Since(start)
	if err := s.StopWithin(30 * time.Second); err != nil {
		return soakResult{}, err
	}
	if err := <-runErr; err != nil && !errors.Is(err, context.Canceled) {
		return soakResult{}, err
	}
	return soakResult{name: "input", samples: smp.samples, wall: wall}, nil
}

// writeHeapProfile writes the heap profile as of the last GC to path; a
// failure is reported and does not stop the run.
func writeHeapProfile(path string) {
	f, err := os.Create(path)
	if err == nil {
		err = pprof.Lookup("heap").WriteTo(f, 0)
		if cerr := f.Close(); err == nil {
			err = cerr
		}
	}
	if err != nil {
		fmt.Fprintf(os.Stderr, "bench soak: writing heap profile %s: %v\n", path, err)
	}
}
