package main

import (
	"cmp"
	"context"
	"errors"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/kinesis"
	"github.com/google/pprof/profile"

	"github.com/connect-kinesis/connect-kinesis/internal/testenv"
)

// The process case of the output part runs a whole pipeline as a user does,
// `connect-kinesis run` of a generate -> kinesis config, one process per
// side, and charges each side with what its process used: CPU (user +
// system, from the child's rusage) per record, wall time, and peak RSS
// (ru_maxrss, the kernel's VmHWM of the child). Within one process the
// runtime keeps freed pages, so only a process of its own shows a side's
// peak. The baselines are measured in the same run, rounds alternating:
// generate -> drop (what the pipeline costs without the output) and a raw
// aws-sdk-go-v2 PutRecords loop in a process of its own.

func init() {
	parts["rawloop"] = part{
		summary: "(internal) the process case's raw SDK loop, run by the output part as a child",
		run:     runRawLoop,
	}
}

// processFlags shape the process case: the defaults are those of the
// comparison users made (200,000 messages of 200 B from generate, 64 keys,
// batching {count: 500, period: 100ms}, max_in_flight 64, 4 shards).
type processFlags struct {
	records, size, keys, shards, concurrency, rounds int
	bin                                              string
	only                                             string
	heapProfile, cpuProfile                          string
	profileSide, profileSeconds                      int
	sides                                            string
}

func (p *processFlags) register(fs *flag.FlagSet) {
	fs.IntVar(&p.rounds, "process-rounds", 3, "alternating rounds of the process case (0 skips it)")
	fs.IntVar(&p.records, "process-n", 200000, "messages each process writes")
	fs.IntVar(&p.keys, "process-keys", 64, "partition keys of the process case")
	fs.StringVar(&p.bin, "bin", "", "the connect-kinesis binary the process case runs (empty: build it into a temporary directory)")
	fs.StringVar(&p.only, "only", "", "run only this case: process (the in-process sides are skipped)")
	fs.StringVar(&p.heapProfile, "heapprofile", "", "write a heap profile of one process of the case (see -profile-side), taken at its peak RSS, to this file")
	fs.StringVar(&p.cpuProfile, "process-cpuprofile", "", "write a CPU profile of one process of the case (see -profile-side), -profile-seconds from its start, to this file")
	fs.StringVar(&p.sides, "process-sides", "", "comma-separated sides of the process case to run (0 ordered, 1 unordered, 2 generate -> drop, 3 raw SDK loop, 4 generate -> batching -> drop, 5 ordered + aggregation, 6 ordered at 1,024 keys, 7 unordered at 1,024 keys; empty: all, and the ratios)")
	fs.IntVar(&p.profileSeconds, "profile-seconds", 10, "how long -process-cpuprofile profiles, from the process' start (shorter than the run: a profile the process does not live to finish is lost)")
	fs.IntVar(&p.profileSide, "profile-side", 0, "the side -heapprofile and -process-cpuprofile profile, in its first round: 0 ordered, 1 unordered, 2 generate -> drop, 4 generate -> batching -> drop, 5 ordered + aggregation")
}

// processSide is one process of the case.
type processSide struct {
	name   string
	output string // the output section of the config; "" for the raw loop
	raw    bool
	keys   int // partition keys; 0 is -process-keys
}

// processResult is what one process used.
type processResult struct {
	cpu  time.Duration
	sys  time.Duration // the part of cpu spent in the kernel
	wall time.Duration
	rss  uint64
}

func processSides() []processSide {
	kinesisOutput := func(extra string) string {
		return `
  kinesis:
    stream: ${STREAM}
    endpoint: ${ENDPOINT}
    partition_key: ${! meta("key") }
    max_in_flight: 64
    batching: { count: 500, period: 100ms }` + extra
	}
	return []processSide{
		{name: "ordered (default)", output: kinesisOutput("")},
		{name: "preserve_order false", output: kinesisOutput("\n    preserve_order: false")},
		{name: "generate -> drop", output: "\n  drop: {}"},
		{name: "raw SDK loop", raw: true},
		// The pipeline with the output's batching but no output: what
		// Benthos' batching, transactions and acks cost on their own.
		{name: "batching -> drop", output: `
  broker:
    outputs: [ { drop: {} } ]
    batching: { count: 500, period: 100ms }`},
		// The remedy the output's INFO names for a key-bound write: a
		// round then holds each key once as one aggregated record.
		{name: "ordered + aggregation", output: kinesisOutput("\n    aggregation: { enabled: true }")},
		// Order at many keys, where a request still holds 500 records: what
		// the ordered machinery costs beyond the requests it must send.
		{name: "ordered, 1024 keys", output: kinesisOutput(""), keys: 1024},
		{name: "unordered, 1024 keys", output: kinesisOutput("\n    preserve_order: false"), keys: 1024},
	}
}

// runProcessCase runs every side f.rounds times, rotating which goes first,
// and prints the medians with the ratios against the targets.
func runProcessCase(ctx context.Context, emu *testenv.Kinesis, f processFlags, size, concurrency int) error {
	if f.rounds < 1 {
		return nil
	}
	bin := f.bin
	if bin == "" {
		dir, err := os.MkdirTemp("", "bench-process-")
		if err != nil {
			return err
		}
		defer os.RemoveAll(dir)
		bin = filepath.Join(dir, "connect-kinesis")
		fmt.Fprintln(os.Stderr, "bench output: building connect-kinesis for the process case...")
		build := exec.CommandContext(ctx, "go", "build", "-o", bin, "./cmd/connect-kinesis")
		build.Env = append(os.Environ(), "CGO_ENABLED=0")
		build.Stdout, build.Stderr = os.Stderr, os.Stderr
		if err := build.Run(); err != nil {
			return fmt.Errorf("building connect-kinesis (run from the repository's root, or give -bin): %w", err)
		}
	}
	self, err := os.Executable()
	if err != nil {
		return err
	}
	sides := processSides()
	if f.sides != "" {
		var picked []processSide
		for _, s := range strings.Split(f.sides, ",") {
			i, err := strconv.Atoi(strings.TrimSpace(s))
			if err != nil || i < 0 || i >= len(sides) {
				return fmt.Errorf("-process-sides %q: want side numbers 0 to %d", s, len(sides)-1)
			}
			picked = append(picked, sides[i])
		}
		sides = picked
	}
	results := make([][]processResult, len(sides))
	for r := range f.rounds {
		for j := range sides {
			i := (r + j) % len(sides)
			stream := fmt.Sprintf("bench-process-%d-%d", r, i)
			if _, err := emu.CreateStream(ctx, stream, f.shards); err != nil {
				return err
			}
			var prof profiles
			if r == 0 && i == f.profileSide {
				prof = profiles{heap: f.heapProfile, cpu: f.cpuProfile, cpuSeconds: f.profileSeconds}
			}
			res, err := runProcessSide(ctx, bin, self, sides[i], stream, emu.Endpoint, f, size, concurrency, prof)
			if err != nil {
				return fmt.Errorf("process case, round %d, %s: %w", r+1, sides[i].name, err)
			}
			results[i] = append(results[i], res)
			// kinesalite keeps what it stored in memory: drop it, so every
			// round writes to an empty emulator alike.
			_, _ = emu.Client().DeleteStream(ctx, &kinesis.DeleteStreamInput{StreamName: aws.String(stream)})
		}
	}

	med := make([]processResult, len(sides))
	for i := range sides {
		med[i] = medianProcess(results[i])
	}
	per := func(r processResult) float64 { return float64(r.cpu.Microseconds()) / float64(f.records) }
	fmt.Printf("Whole processes (connect-kinesis run: generate -> output), %d messages x %d B, %d keys (1024 where named), %d shards, batching {count: 500, period: 100ms}, max_in_flight 64;\n", f.records, size, f.keys, f.shards)
	fmt.Printf("CPU = user + system of the process, peak RSS = its VmHWM; medians of %d alternating rounds:\n", f.rounds)
	fmt.Printf("%-22s %14s %10s %14s\n", "", "CPU µs/record", "wall", "peak RSS MiB")
	for i, s := range sides {
		fmt.Printf("%-22s %14.1f %10s %14.1f\n", s.name, per(med[i]), med[i].wall.Round(10*time.Millisecond), mib(med[i].rss))
		var rounds []string
		for _, r := range results[i] {
			rounds = append(rounds, fmt.Sprintf("%.1f µs (%.0f%% system) %s %.0f MiB", per(r), 100*r.sys.Seconds()/r.cpu.Seconds(), r.wall.Round(10*time.Millisecond), mib(r.rss)))
		}
		fmt.Printf("%-22s   rounds: %s\n", "", strings.Join(rounds, ", "))
	}
	if len(sides) < 8 {
		return nil
	}
	printProcessTargets(ctx, bin, self, emu, f, size, concurrency, sides, results, med)
	return nil
}

// runProcessSide runs one side's process to its end and returns its usage.
func runProcessSide(ctx context.Context, bin, self string, s processSide, stream, endpoint string, f processFlags, size, concurrency int, prof profiles) (processResult, error) {
	debug := prof.heap != "" || prof.cpu != ""
	var cmd *exec.Cmd
	if s.raw {
		cmd = exec.CommandContext(ctx, self, "rawloop", "-endpoint", endpoint, "-stream", stream,
			"-n", fmt.Sprint(f.records), "-size", fmt.Sprint(size), "-keys", fmt.Sprint(cmp.Or(s.keys, f.keys)), "-concurrency", fmt.Sprint(concurrency))
	} else {
		conf := fmt.Sprintf(`
http:
  enabled: %t
  address: 127.0.0.1:%d
  debug_endpoints: %t
input:
  generate:
    count: %d
    interval: ""
    mapping: |
      root = %q
      meta key = (count("bench_keys") %% %d).string()
output:%s
logger:
  level: warn
`, debug, debugPort, debug, f.records, string(payload(size)), cmp.Or(s.keys, f.keys), s.output)
		conf = strings.NewReplacer("${STREAM}", stream, "${ENDPOINT}", endpoint).Replace(conf)
		path := filepath.Join(os.TempDir(), fmt.Sprintf("bench-process-%s.yaml", stream))
		if err := os.WriteFile(path, []byte(conf), 0o600); err != nil {
			return processResult{}, err
		}
		defer os.Remove(path)
		cmd = exec.CommandContext(ctx, bin, "run", path)
	}
	cmd.Env = append(os.Environ(), "AWS_ACCESS_KEY_ID="+testenv.AccessKey, "AWS_SECRET_ACCESS_KEY="+testenv.SecretKey,
		"AWS_REGION="+testenv.Region, "AWS_EC2_METADATA_DISABLED=true")
	var stderr strings.Builder
	cmd.Stdout, cmd.Stderr = os.Stderr, &stderr
	start := time.Now()
	if err := cmd.Start(); err != nil {
		return processResult{}, err
	}
	profileErr := make(chan error, 2)
	waits := 0
	if prof.heap != "" {
		waits++
		go func() { profileErr <- heapAtPeak(ctx, cmd.Process.Pid, prof.heap) }()
	}
	if prof.cpu != "" {
		waits++
		go func() { profileErr <- cpuFor(ctx, prof.cpu, prof.cpuSeconds) }()
	}
	err := cmd.Wait()
	wall := time.Since(start)
	if err != nil {
		return processResult{}, fmt.Errorf("%w: %s", err, stderr.String())
	}
	if strings.Contains(stderr.String(), "level=error") {
		return processResult{}, fmt.Errorf("the process logged errors: %s", stderr.String())
	}
	for range waits {
		if err := <-profileErr; err != nil {
			fmt.Fprintf(os.Stderr, "bench output: profile: %v\n", err)
		}
	}
	ru, ok := cmd.ProcessState.SysUsage().(*syscall.Rusage)
	if !ok {
		return processResult{}, errors.New("no rusage for the child")
	}
	return processResult{
		cpu:  time.Duration(ru.Utime.Nano() + ru.Stime.Nano()),
		sys:  time.Duration(ru.Stime.Nano()),
		wall: wall,
		rss:  uint64(ru.Maxrss) << 10, // kilobytes on Linux
	}, nil
}

func medianProcess(rs []processResult) processResult {
	mid := func(get func(processResult) int64) int64 {
		vs := make([]int64, len(rs))
		for i, r := range rs {
			vs[i] = get(r)
		}
		slices.Sort(vs)
		return vs[len(vs)/2]
	}
	return processResult{
		cpu:  time.Duration(mid(func(r processResult) int64 { return int64(r.cpu) })),
		wall: time.Duration(mid(func(r processResult) int64 { return int64(r.wall) })),
		rss:  uint64(mid(func(r processResult) int64 { return int64(r.rss) })),
	}
}

// ownShare runs side once more with a CPU profile over nearly all of its
// run (wall is how long the side took in the rounds) and returns the share
// of the profile's CPU spent under the output's WriteBatch or in the HTTP
// client's connection goroutines (net/http's persistConn loops).
func ownShare(ctx context.Context, bin, self string, side processSide, emu *testenv.Kinesis, f processFlags, size, concurrency int, wall time.Duration) (float64, error) {
	dir, err := os.MkdirTemp("", "bench-own-")
	if err != nil {
		return 0, err
	}
	defer os.RemoveAll(dir)
	stream := "bench-process-own"
	if _, err := emu.CreateStream(ctx, stream, f.shards); err != nil {
		return 0, err
	}
	defer func() {
		_, _ = emu.Client().DeleteStream(ctx, &kinesis.DeleteStreamInput{StreamName: aws.String(stream)})
	}()
	path := filepath.Join(dir, "cpu.pprof")
	seconds := max(1, int(wall.Seconds())-2)
	if _, err := runProcessSide(ctx, bin, self, side, stream, emu.Endpoint, f, size, concurrency, profiles{cpu: path, cpuSeconds: seconds}); err != nil {
		return 0, err
	}
	b, err := os.ReadFile(path)
	if err != nil {
		return 0, err
	}
	prof, err := profile.ParseData(b)
	if err != nil {
		return 0, err
	}
	value := len(prof.SampleType) - 1 // cpu nanoseconds, after the sample count
	var total, own int64
	for _, sample := range prof.Sample {
		v := sample.Value[value]
		total += v
		if sampleUnder(sample, "plugins/output.(*kinesisOutput).WriteBatch", "net/http.(*persistConn).readLoop", "net/http.(*persistConn).writeLoop") {
			own += v
		}
	}
	if total == 0 {
		return 0, errors.New("the profile has no samples")
	}
	return float64(own) / float64(total), nil
}

// sampleUnder reports whether a function whose name ends with one of names
// is on the sample's stack.
func sampleUnder(sample *profile.Sample, names ...string) bool {
	for _, loc := range sample.Location {
		for _, line := range loc.Line {
			if line.Function == nil {
				continue
			}
			for _, n := range names {
				if strings.HasSuffix(line.Function.Name, n) {
					return true
				}
			}
		}
	}
	return false
}
