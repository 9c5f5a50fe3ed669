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
	"runtime"
	"runtime/metrics"
	"runtime/pprof"
	"slices"
	"sync"
	"sync/atomic"
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

// cpuTime is the CPU time this process used so far (user + system). The
// emulator is another process, so its CPU is not counted.
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
	// peakHeap is the most heap the side added while it ran: see
	// heapSampler.
	peakHeap uint64
}

// measure runs fn and measures its wall time, the CPU time of the process
// and the peak heap it added.
func measure(records int, fn func() error) (measurement, error) {
	heap := startHeapSampler()
	startCPU, start := cpuTime(), time.Now()
	err := fn()
	m := measurement{records: records, wall: time.Since(start), cpu: cpuTime() - startCPU}
	m.peakHeap = heap.stop()
	return m, err
}

// measureUntil is measure for a side that keeps working after its measured
// records are done: fn calls mark when they are, and the measurement ends
// there (or when fn returns, if it never calls mark).
func measureUntil(records int, fn func(mark func()) error) (measurement, error) {
	heap := startHeapSampler()
	startCPU, start := cpuTime(), time.Now()
	var m measurement
	mark := sync.OnceFunc(func() {
		m = measurement{records: records, wall: time.Since(start), cpu: cpuTime() - startCPU}
		m.peakHeap = heap.stop()
	})
	err := fn(mark)
	mark()
	return m, err
}

// add sums two measurements of the same side; the peak is the higher one.
func (m measurement) add(o measurement) measurement {
	return measurement{records: m.records + o.records, wall: m.wall + o.wall, cpu: m.cpu + o.cpu, peakHeap: max(m.peakHeap, o.peakHeap)}
}

// median is one side's median round: records of a round, and the median
// wall time, CPU time and peak heap of the rounds taken one by one. Every
// round of a side reads the same number of records, so its records/s and
// CPU per record are the medians of the rounds' too.
func median(rounds []measurement) measurement {
	mid := func(get func(measurement) int64) int64 {
		vs := make([]int64, len(rounds))
		for i, r := range rounds {
			vs[i] = get(r)
		}
		slices.Sort(vs)
		if n := len(vs); n%2 == 0 {
			return (vs[n/2-1] + vs[n/2]) / 2
		}
		return vs[len(vs)/2]
	}
	return measurement{
		records:  rounds[0].records,
		wall:     time.Duration(mid(func(m measurement) int64 { return int64(m.wall) })),
		cpu:      time.Duration(mid(func(m measurement) int64 { return int64(m.cpu) })),
		peakHeap: uint64(mid(func(m measurement) int64 { return int64(m.peakHeap) })),
	}
}

// heapSampleInterval is how often a heapSampler reads the heap: often
// enough that the peak before a collection is seen within what the process
// allocates in that time.
const heapSampleInterval = 10 * time.Millisecond

// heapSampler follows the peak of the heap's objects (live and not yet
// collected: what the process' heap must hold) above the live heap when it
// started, so each side of one process is charged with what it added. Heap
// rather than RSS: RSS only grows within one process (the runtime keeps
// freed pages a while), so it cannot tell one side from the one before.
type heapSampler struct {
	base    uint64
	peak    atomic.Uint64
	done    chan struct{}
	stopped chan struct{}
}

func startHeapSampler() *heapSampler {
	// Start from the live heap alone: what an earlier side left to collect
	// is not this side's.
	runtime.GC()
	h := &heapSampler{done: make(chan struct{}), stopped: make(chan struct{})}
	h.base = h.read()
	go func() {
		defer close(h.stopped)
		t := time.NewTicker(heapSampleInterval)
		defer t.Stop()
		for {
			h.sample()
			select {
			case <-t.C:
			case <-h.done:
				return
			}
		}
	}()
	return h
}

// read is the bytes of heap objects now, live or not yet collected.
func (h *heapSampler) read() uint64 {
	s := []metrics.Sample{{Name: "/memory/classes/heap/objects:bytes"}}
	metrics.Read(s)
	return s[0].Value.Uint64()
}

func (h *heapSampler) sample() {
	v := h.read()
	if v > h.peak.Load() {
		h.peak.Store(v)
	}
}

// stop ends the sampling and returns the peak above the start.
func (h *heapSampler) stop() uint64 {
	h.sample()
	close(h.done)
	<-h.stopped
	return h.peak.Load() - min(h.base, h.peak.Load())
}

func (m measurement) perSecond() float64 { return float64(m.records) / m.wall.Seconds() }

// cpuPer100k is CPU-seconds per 100,000 records.
func (m measurement) cpuPer100k() float64 { return m.cpu.Seconds() * 100000 / float64(m.records) }

// printComparison prints records/s, CPU per 100k records and peak heap of
// a baseline and of ours, and the ratios against the targets (none when
// both are 0, no CPU target when maxCPU is 0).
func printComparison(title, baselineName, oursName string, baseline, ours measurement, minRate, maxCPU float64) {
	fmt.Println(title)
	fmt.Printf("%-22s %12s %14s %10s %14s\n", "", "records/s", "CPU-s/100k", "wall", "peak heap MiB")
	for _, s := range []side{{baselineName, baseline}, {oursName, ours}} {
		fmt.Printf("%-22s %12.0f %14.3f %10s %14.1f\n", s.name, s.m.perSecond(), s.m.cpuPer100k(), s.m.wall.Round(time.Millisecond), mib(s.m.peakHeap))
	}
	rate := ours.perSecond() / baseline.perSecond()
	cpu := ours.cpuPer100k() / baseline.cpuPer100k()
	fmt.Printf("%-22s %11.2fx %13.2fx\n", "ratio "+oursName+"/"+baselineName, rate, cpu)
	if minRate == 0 && maxCPU == 0 {
		return // for information: no target
	}
	if maxCPU == 0 {
		// A throughput target alone.
		fmt.Printf("%-22s %12s\n", "target", fmt.Sprintf(">= %.2fx", minRate))
		fmt.Printf("%-22s %12s\n", "", verdict(rate >= minRate))
		return
	}
	fmt.Printf("%-22s %12s %14s\n", "target", fmt.Sprintf(">= %.2fx", minRate), fmt.Sprintf("<= %.2fx", maxCPU))
	fmt.Printf("%-22s %12s %14s\n", "", verdict(rate >= minRate), verdict(cpu <= maxCPU))
}

// side is one named measurement.
type side struct {
	name string
	m    measurement
}

// printMemory prints the peak heap of every side against the memory target:
// at most twice the baseline's plus the bytes the side may hold in flight
// by its configuration (records handed on and not yet acknowledged).
func printMemory(baselineName string, baseline measurement, inFlight uint64, sides ...side) {
	limit := 2*baseline.peakHeap + inFlight
	fmt.Printf("Peak heap added while running (sampled every %v, after a GC at each side's start):\n", heapSampleInterval)
	fmt.Printf("%-22s %10.1f MiB\n", baselineName, mib(baseline.peakHeap))
	for _, s := range sides {
		fmt.Printf("%-22s %10.1f MiB   %5.2fx   %s\n", s.name, mib(s.m.peakHeap),
			float64(s.m.peakHeap)/float64(max(baseline.peakHeap, 1)), verdict(s.m.peakHeap <= limit))
	}
	fmt.Printf("%-22s <= %7.1f MiB   (2 x %s + %.1f MiB in flight)\n", "target", mib(limit), baselineName, mib(inFlight))
}

func mib(b uint64) float64 { return float64(b) / (1 << 20) }

func verdict(ok bool) string {
	if ok {
		return "met"
	}
	return "MISSED"
}
