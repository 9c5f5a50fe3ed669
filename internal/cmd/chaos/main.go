// Command chaos runs the reliability suite against the real connect-kinesis
// binary: `go run ./internal/cmd/chaos` (the full form, `make chaos`) or
// `go run ./internal/cmd/chaos -short`. It runs its phases (a Redis that
// keeps its data (AOF) with `trim_horizon`, a Redis that comes back empty
// with `latest`, Redis stalls, and standbys with a Redis that comes back
// empty), prints a table for each and exits
// non-zero unless nothing was lost, per-key order held and duplicates stayed
// within the design's bound.
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/connect-kinesis/connect-kinesis/internal/chaos"
)

func main() {
	var (
		short = flag.Bool("short", false, "the short form run by `make test`")
		bin   = flag.String("bin", "", "the connect-kinesis binary (default: built from ./cmd/connect-kinesis)")
		dir   = flag.String("dir", "", "where configs, logs and delivery files go (default: a new temporary folder, kept)")
		seed  = flag.Uint64("seed", uint64(time.Now().UnixNano()), "seed of the schedule and the proxy's faults")
		efo   = flag.Bool("efo", false, "consumers read with enhanced fan-out (SubscribeToShard over kinesis-mock's TLS port), their connections cut now and then")
	)
	flag.Parse()
	if err := run(*short, *bin, *dir, *seed, *efo); err != nil {
		fmt.Fprintln(os.Stderr, "chaos:", err)
		os.Exit(1)
	}
}

func run(short bool, bin, dir string, seed uint64, efo bool) error {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	var err error
	if dir == "" {
		if dir, err = os.MkdirTemp("", "connect-kinesis-chaos-"); err != nil {
			return err
		}
	} else if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	if bin == "" {
		bin = filepath.Join(dir, "connect-kinesis")
		fmt.Fprintln(os.Stderr, "chaos: building connect-kinesis")
		build := exec.CommandContext(ctx, "go", "build", "-o", bin, "./cmd/connect-kinesis")
		build.Stdout, build.Stderr = os.Stderr, os.Stderr
		if err := build.Run(); err != nil {
			return fmt.Errorf("building connect-kinesis (run from the repository root): %w", err)
		}
	}
	fmt.Fprintf(os.Stderr, "chaos: seed %d, files in %s\n", seed, dir)
	failed := false
	// The first phase reads each shard in four lanes (shard_parallelism),
	// so per-key order and nothing lost are checked with lanes too; the
	// denied-shard phase runs under a byte budget so small that shards take
	// turns.
	for _, phase := range []struct {
		name                         string
		emptyRedis, stalls, standbys bool
		lanes                        int
		budget                       string
		pausedHolder, closesParent   bool
		outputDown                   time.Duration
	}{
		{"redis-keeps-data", false, false, false, 4, "", false, false, 0},
		{"redis-down-past-the-lease-comes-back-empty", true, false, false, 1, "", false, false, 0},
		{"redis-stalls-64KiB-budget", false, true, false, 1, "64KiB", false, false, 0},
		{"standbys-redis-comes-back-empty", true, false, true, 1, "", false, false, 0},
		{splitBatchingPhase, false, false, false, 1, "", false, false, 0},
		{"paused-holder-redis-comes-back-empty", true, false, false, 1, "", true, false, 0},
		// A second stream of one shard whose every GetShardIterator is
		// denied, read with the first under a small budget (issue 33).
		{"denied-shard-256KiB-budget", false, false, false, 1, "256KiB", false, false, 0},
		// The paused holder's shard is split; a newcomer reads the parent
		// from `latest` and closes it before the holder wakes.
		{"paused-holder-parent-closed-by-newcomer", true, false, false, 1, "", true, true, 0},
		// The instances' output answers 503 for 30 s, with max_attempts 3.
		{"output-down-30s", false, false, false, 1, "", false, false, 30 * time.Second},
	} {
		phaseDir := filepath.Join(dir, phase.name)
		if err := os.MkdirAll(phaseDir, 0o755); err != nil {
			return err
		}
		fmt.Fprintf(os.Stderr, "chaos: phase %s (shard_parallelism %d)\n", phase.name, phase.lanes)
		var (
			mu   sync.Mutex
			pids []int
		)
		t, err := chaos.Run(ctx, chaos.Config{
			Binary: bin, Dir: phaseDir, Seed: seed, Short: short, EmptyRedis: phase.emptyRedis, RedisStalls: phase.stalls, Standbys: phase.standbys, EFO: efo, ShardParallelism: phase.lanes, MaxBufferedBytes: phase.budget, PausedHolder: phase.pausedHolder, ClosesParent: phase.closesParent, OutputDown: phase.outputDown,
			SplitBatching: phase.name == splitBatchingPhase,
			DeniedShard:   strings.HasPrefix(phase.name, "denied-shard"),
			Logf:          func(format string, args ...any) { fmt.Fprintf(os.Stderr, format+"\n", args...) },
			Started:       func(pid int) { mu.Lock(); pids = append(pids, pid); mu.Unlock() },
		})
		// Every process a phase started must be gone when it returns.
		mu.Lock()
		for _, pid := range pids {
			if syscall.Kill(pid, 0) == nil {
				fmt.Printf("phase %s left process %d running\n", phase.name, pid)
				failed = true
			}
		}
		mu.Unlock()
		if err != nil {
			fmt.Printf("phase %s could not be carried out: %v\n\n", phase.name, err)
			failed = true
			continue
		}
		fmt.Printf("phase %s (shard_parallelism %d)\n%s\n", phase.name, phase.lanes, t.String())
		failed = failed || !t.OK()
	}
	if failed {
		return fmt.Errorf("records lost, out of order or duplicated beyond the bound, or a process left running (see above; seed %d, files in %s)", seed, dir)
	}
	return nil
}

// splitBatchingPhase writes through an output batching policy with a
// splitting processor, with records that fail validation among valid ones
// of the same keys (chaos.Config.SplitBatching).
const splitBatchingPhase = "output-split-batching-invalid-records"
