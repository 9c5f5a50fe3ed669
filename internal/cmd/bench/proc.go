package main

import (
	"fmt"
	"os"
	"runtime"
	"strconv"
	"strings"
	"time"
)

// clockTicks is the kernel's USER_HZ, the unit of /proc/<pid>/stat times;
// it is 100 on every Linux this runs on.
const clockTicks = 100

// procCPU is the CPU time (user + system) process pid used so far, from
// /proc/<pid>/stat.
func procCPU(pid int) (time.Duration, error) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return 0, fmt.Errorf("reading CPU time of process %d: %w", pid, err)
	}
	// The command name (field 2) may hold spaces; the fields after its
	// closing parenthesis are plain. utime and stime are fields 14 and 15.
	s := string(b)
	fields := strings.Fields(s[strings.LastIndexByte(s, ')')+1:])
	if len(fields) < 13 {
		return 0, fmt.Errorf("reading CPU time of process %d: short stat line", pid)
	}
	utime, err1 := strconv.ParseInt(fields[11], 10, 64)
	stime, err2 := strconv.ParseInt(fields[12], 10, 64)
	if err1 != nil || err2 != nil {
		return 0, fmt.Errorf("reading CPU time of process %d: malformed stat line", pid)
	}
	return time.Duration(utime+stime) * time.Second / clockTicks, nil
}

// procRSS is the resident set size of process pid in bytes, from
// /proc/<pid>/status.
func procRSS(pid int) (uint64, error) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return 0, fmt.Errorf("reading RSS of process %d: %w", pid, err)
	}
	for _, line := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(line, "VmRSS:"); ok {
			kb, err := strconv.ParseUint(strings.TrimSuffix(strings.TrimSpace(v), " kB"), 10, 64)
			if err != nil {
				return 0, fmt.Errorf("reading RSS of process %d: %w", pid, err)
			}
			return kb << 10, nil
		}
	}
	return 0, fmt.Errorf("reading RSS of process %d: no VmRSS line", pid)
}

// heapSample is this process's memory at one point of a run.
type heapSample struct {
	records   int
	heapInuse uint64 // runtime.MemStats.HeapInuse right after a GC
	heapAlloc uint64 // runtime.MemStats.HeapAlloc, read with heapInuse
	rss       uint64
}

// sampleHeap forces a GC, so what is left in use is what the run holds
// rather than garbage not yet collected, and reads the heap and the RSS.
func sampleHeap(records int) heapSample {
	runtime.GC()
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	rss, _ := procRSS(os.Getpid())
	return heapSample{records: records, heapInuse: ms.HeapInuse, heapAlloc: ms.HeapAlloc, rss: rss}
}
