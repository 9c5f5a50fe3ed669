// Command bench measures connect-kinesis against a baseline in the same run,
// on a local kinesalite, and prints a table with the ratios:
//
//	go run ./internal/cmd/bench output [flags]
//
// Each part (output, input...) lives in its own file and registers itself in
// parts from an init function.
package main

import (
	"context"
	"fmt"
	"maps"
	"os"
	"os/signal"
	"runtime/pprof"
	"slices"
	"sync"
	"syscall"
	"time"
)

// part is one benchmark: it parses its own flags and prints its table.
type part struct {
	summary string
	run     func(ctx context.Context, args []string) error
}

var parts = map[string]part{}

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()

	if len(os.Args) < 2 || parts[os.Args[1]].run == nil {
		usage()
		os.Exit(2)
	}
	if err := parts[os.Args[1]].run(ctx, os.Args[2:]); err != nil {
		fmt.Fprintf(os.Stderr, "bench %s: %v\n", os.Args[1], err)
		os.Exit(1)
	}
}

func usage() {
	fmt.Fprintln(os.Stderr, "usage: bench <part> [flags]   (bench <part> -h for the part's flags)")
	for _, name := range slices.Sorted(maps.Keys(parts)) {
		fmt.Fprintf(os.Stderr, "  %-8s %s\n", name, parts[name].summary)
	}
}

// cpuTime is the CPU time this process used so far (user + system). The
// emulator is another process, so its CPU is not counted.
// startCPUProfile writes a CPU profile to path until stop is called (stop
// may be called more than once); with no path it does nothing.
func startCPUProfile(path string) (stop func(), err error) {
	if path == "" {
		return func() {}, nil
	}
	f, err := os.Create(path)
	if err != nil {
		return nil, err
	}
	if err := pprof.StartCPUProfile(f); err != nil {
		f.Close()
		return nil, err
	}
	return sync.OnceFunc(func() {
		pprof.StopCPUProfile()
		f.Close()
	}), nil
}

func cpuTime() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// measurement is one side of a comparison.
type measurement struct {
	records int
	wall    time.Duration
	cpu     time.Duration
}

func measure(records int, fn func() error) (measurement, error) {
	startCPU, start := cpuTime(), time.Now()
	err := fn()
	return measurement{records: records, wall: time.Since(start), cpu: cpuTime() - startCPU}, err
}

// add sums two measurements of the same side.
func (m measurement) add(o measurement) measurement {
	return measurement{records: m.records + o.records, wall: m.wall + o.wall, cpu: m.cpu + o.cpu}
}

func (m measurement) perSecond() float64 { return float64(m.records) / m.wall.Seconds() }

// cpuPer100k is CPU-seconds per 100,000 records.
func (m measurement) cpuPer100k() float64 { return m.cpu.Seconds() * 100000 / float64(m.records) }

// printComparison prints records/s and CPU per 100k records of a baseline
// and of ours, and the ratios against the targets.
func printComparison(title, baselineName, oursName string, baseline, ours measurement, minRate, maxCPU float64) {
	fmt.Println(title)
	fmt.Printf("%-22s %12s %14s %10s\n", "", "records/s", "CPU-s/100k", "wall")
	fmt.Printf("%-22s %12.0f %14.3f %10s\n", baselineName, baseline.perSecond(), baseline.cpuPer100k(), baseline.wall.Round(time.Millisecond))
	fmt.Printf("%-22s %12.0f %14.3f %10s\n", oursName, ours.perSecond(), ours.cpuPer100k(), ours.wall.Round(time.Millisecond))
	rate := ours.perSecond() / baseline.perSecond()
	cpu := ours.cpuPer100k() / baseline.cpuPer100k()
	fmt.Printf("%-22s %11.2fx %13.2fx\n", "ratio "+oursName+"/"+baselineName, rate, cpu)
	fmt.Printf("%-22s %12s %14s\n", "target", fmt.Sprintf(">= %.2fx", minRate), fmt.Sprintf("<= %.2fx", maxCPU))
	verdict := func(ok bool) string {
		if ok {
			return "met"
		}
		return "MISSED"
	}
	fmt.Printf("%-22s %12s %14s\n", "", verdict(rate >= minRate), verdict(cpu <= maxCPU))
}
