package main

import (
	"slices"
	"time"
)

// The input part's phases (input.go): a run's start-up, until its first
// records, and its reading, from the first records to the last, measured
// apart so that a new group's one wait before its first take is not
// counted as slow reading.

// readingWindow is one run's reading: from its first records to its
// last, after a start-up from begin.
type readingWindow struct {
	begin, start, end    time.Time
	startCPU, endCPU     time.Duration
	startRecords         int64 // records that came with the first
	startCmds, endCmds   int64
	startStats, endStats map[string]int64
}

// mark notes the first records (first) or the last, n records in all.
func (w *readingWindow) mark(first bool, n int64) {
	if first {
		w.start, w.startCPU, w.startRecords = time.Now(), cpuTime(), n
		return
	}
	w.end, w.endCPU = time.Now(), cpuTime()
}

// reading is each round's reading window as a measurement (no heap).
func (s *inputSide) reading() []measurement {
	out := make([]measurement, len(s.windows))
	for i, w := range s.windows {
		out[i] = measurement{records: int(int64(s.rounds[i].records) - w.startRecords), wall: w.end.Sub(w.start), cpu: w.endCPU - w.startCPU}
	}
	return out
}

// startup is the median time from a round's start to its first records.
func (s *inputSide) startup() time.Duration {
	d := make([]time.Duration, len(s.windows))
	for i, w := range s.windows {
		d[i] = w.start.Sub(w.begin)
	}
	slices.Sort(d)
	return d[len(d)/2]
}
