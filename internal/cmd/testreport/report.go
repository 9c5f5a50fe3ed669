package main

import (
	"bufio"
	"encoding/json"
	"fmt"
	"io"
	"sort"
	"strings"
	"time"
)

// event is one line of `go test -json` (cmd/test2json), with the build
// events go test adds since Go 1.24.
type event struct {
	Action     string
	Package    string
	Test       string
	Elapsed    float64
	Output     string
	ImportPath string
}

// testKey names a test within its package.
type testKey struct{ pkg, test string }

// timing is a finished test and how long it ran.
type timing struct {
	testKey
	elapsed time.Duration
}

// report turns the event stream into go test's usual terse output: a line
// per package, the output of failing tests (held back until they fail, so
// parallel tests do not interleave), build errors as they come.
type report struct {
	out     io.Writer
	pending map[testKey][]string // output of tests still running
	timings []timing

	passed, failed, skipped int
	failedIn                map[string]int // failed tests per package
	// broken counts packages that failed outside any test: a build error,
	// a panic, a timeout, TestMain failing.
	broken int
}

func newReport(out io.Writer) *report {
	return &report{out: out, pending: map[testKey][]string{}, failedIn: map[string]int{}}
}

// read consumes the stream until EOF. Lines that are not JSON (go's own
// messages on stderr, merged in by the caller) are printed as they are.
func (r *report) read(in io.Reader) error {
	sc := bufio.NewScanner(in)
	sc.Buffer(make([]byte, 1<<20), 16<<20)
	for sc.Scan() {
		line := sc.Bytes()
		var e event
		if len(line) == 0 || line[0] != '{' || json.Unmarshal(line, &e) != nil {
			fmt.Fprintf(r.out, "%s\n", line)
			continue
		}
		r.handle(e)
	}
	if err := sc.Err(); err != nil {
		return fmt.Errorf("reading go test -json: %w", err)
	}
	return nil
}

func (r *report) handle(e event) {
	if e.Test == "" {
		r.handlePackage(e)
		return
	}
	k := testKey{e.Package, e.Test}
	switch e.Action {
	case "output":
		// A soak's verdict line (TestIntegrationSoak) is shown even when
		// its test passes.
		if strings.HasPrefix(e.Output, "soak: seed=") {
			fmt.Fprint(r.out, e.Output)
		}
		r.pending[k] = append(r.pending[k], e.Output)
	case "pass":
		r.passed++
		r.finish(k, e, false)
	case "skip":
		r.skipped++
		delete(r.pending, k)
	case "fail":
		r.failed++
		r.failedIn[e.Package]++
		r.finish(k, e, true)
	}
}

// finish prints a failed test's output and records the test's time.
func (r *report) finish(k testKey, e event, show bool) {
	if show {
		r.flush(k)
	}
	delete(r.pending, k)
	// Subtests count too: a parent whose subtests run in parallel reports
	// only its own few milliseconds.
	r.timings = append(r.timings, timing{k, time.Duration(e.Elapsed * float64(time.Second))})
}

// flush prints what a test printed, without the run/pause/cont markers
// that -json mode adds.
func (r *report) flush(k testKey) {
	for _, line := range r.pending[k] {
		trimmed := strings.TrimSpace(line)
		if strings.HasPrefix(trimmed, "=== RUN") || strings.HasPrefix(trimmed, "=== PAUSE") ||
			strings.HasPrefix(trimmed, "=== CONT") || strings.HasPrefix(trimmed, "=== NAME") {
			continue
		}
		fmt.Fprint(r.out, line)
	}
}

func (r *report) handlePackage(e event) {
	switch e.Action {
	case "build-output":
		fmt.Fprint(r.out, e.Output)
	case "build-fail":
		r.broken++
	case "output":
		if strings.TrimSpace(e.Output) != "PASS" {
			fmt.Fprint(r.out, e.Output)
		}
	case "fail":
		// Tests that never finished (a panic, the -timeout) hold the
		// clues: print them before the package's FAIL line has scrolled by.
		var stuck []testKey
		for k := range r.pending {
			if k.pkg == e.Package {
				stuck = append(stuck, k)
			}
		}
		sort.Slice(stuck, func(i, j int) bool { return stuck[i].test < stuck[j].test })
		for _, k := range stuck {
			fmt.Fprintf(r.out, "--- unfinished: %s\n", k.test)
			r.flush(k)
			delete(r.pending, k)
		}
		if len(stuck) > 0 || r.failedIn[e.Package] == 0 {
			r.broken++
		}
	}
}

// summary prints the slowest tests and the closing count line,
// and reports whether everything passed.
func (r *report) summary(slowest int) bool {
	sort.SliceStable(r.timings, func(i, j int) bool { return r.timings[i].elapsed > r.timings[j].elapsed })
	n := min(slowest, len(r.timings))
	if n > 0 {
		fmt.Fprintf(r.out, "\nThe %d slowest tests:\n", n)
		for _, t := range r.timings[:n] {
			fmt.Fprintf(r.out, "%9.1fs  %s  %s\n", t.elapsed.Seconds(), t.test, t.pkg)
		}
	}
	fmt.Fprintln(r.out)
	if r.broken > 0 {
		fmt.Fprintf(r.out, "%d package(s) failed outside a test (build error, panic, timeout or TestMain)\n", r.broken)
	}
	line := fmt.Sprintf("%d passed, %d failed", r.passed, r.failed)
	if r.skipped > 0 {
		line += fmt.Sprintf(", %d skipped", r.skipped)
	}
	fmt.Fprintln(r.out, line)
	return r.failed == 0 && r.broken == 0
}
