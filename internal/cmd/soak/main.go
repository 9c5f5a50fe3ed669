// Command soak runs the chaos suite's processes, fault proxy and checker
// under a random schedule drawn from a seed (issue 34): `make soak SEED=N
// DURATION=D`, or `go run ./internal/cmd/soak -seed N -duration D`. It
// prints the seed, the schedule as it ran and, last, one verdict line; it
// exits non-zero unless the verdict is PASS. The same seed and build replay
// the same schedule; -faults switches classes on and off to bisect.
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
	"syscall"
	"time"

	"github.com/connect-kinesis/connect-kinesis/internal/chaos"
)

func main() {
	var (
		bin       = flag.String("bin", "", "the connect-kinesis binary (default: built from ./cmd/connect-kinesis)")
		dir       = flag.String("dir", "", "where configs, logs and delivery files go (default: a new temporary folder, kept)")
		seed      = flag.Uint64("seed", uint64(time.Now().UnixNano()), "seed of the schedule (the same seed and build replay the same schedule)")
		duration  = flag.Duration("duration", 10*time.Minute, "how long the load and its faults last (the instances drain afterwards)")
		instances = flag.Int("instances", 3, "input processes running all along (the scale class adds up to two)")
		faults    = flag.String("faults", "", "comma-separated fault classes to switch on (default: all but "+chaos.ClassWipeHolder+" and "+chaos.ClassEFO+"); a leading '-' on each switches that class off from the default instead. Classes: "+strings.Join(chaos.SoakClasses(), ", "))
	)
	flag.Parse()
	classes, err := parseClasses(*faults)
	if err == nil {
		err = run(*bin, *dir, *seed, *duration, *instances, classes)
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "soak:", err)
		os.Exit(1)
	}
}

// parseClasses reads -faults: a list of classes, or a list of -class to
// take from the default.
func parseClasses(s string) ([]string, error) {
	if strings.TrimSpace(s) == "" {
		return chaos.DefaultClasses(), nil
	}
	var on, off []string
	for _, c := range strings.Split(s, ",") {
		c = strings.TrimSpace(c)
		if name, ok := strings.CutPrefix(c, "-"); ok {
			off = append(off, name)
		} else if c != "" {
			on = append(on, c)
		}
	}
	if len(on) > 0 && len(off) > 0 {
		return nil, fmt.Errorf("-faults %q: either list the classes to run or the ones to switch off (-class), not both", s)
	}
	if len(on) > 0 {
		return on, nil
	}
	out := chaos.DefaultClasses()
	for _, c := range off {
		found := false
		for i, d := range out {
			if d == c {
				out, found = append(out[:i], out[i+1:]...), true
				break
			}
		}
		if !found {
			return nil, fmt.Errorf("-faults: %q is not a default class; the classes are %s", c, strings.Join(chaos.SoakClasses(), ", "))
		}
	}
	return out, nil
}

func run(bin, dir string, seed uint64, d time.Duration, instances int, classes []string) error {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	var err error
	if dir == "" {
		if dir, err = os.MkdirTemp("", "connect-kinesis-soak-"); err != nil {
			return err
		}
	} else if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	if bin == "" {
		bin = filepath.Join(dir, "connect-kinesis")
		fmt.Fprintln(os.Stderr, "soak: building connect-kinesis")
		build := exec.CommandContext(ctx, "go", "build", "-o", bin, "./cmd/connect-kinesis")
		build.Stdout, build.Stderr = os.Stderr, os.Stderr
		if err := build.Run(); err != nil {
			return fmt.Errorf("building connect-kinesis (run from the repository root): %w", err)
		}
	}
	v, err := chaos.RunSoak(ctx, chaos.SoakConfig{
		Binary: bin, Dir: dir, Seed: seed, Duration: d, Instances: instances, Classes: classes,
		Logf: func(format string, args ...any) { fmt.Fprintf(os.Stderr, format+"\n", args...) },
		Out:  os.Stdout,
	})
	if err != nil {
		return fmt.Errorf("the soak could not be carried out (seed %d, files in %s): %w", seed, dir, err)
	}
	if !v.Pass() {
		return fmt.Errorf("verdict FAIL (seed %d, files in %s)", seed, dir)
	}
	return nil
}
