package main

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/connect-kinesis/connect-kinesis/internal/testenv"
)

// One measured process of the backlog part (backlog.go).

// backlogYAML is the process measured: the kinesis input (defaults but
// for its fields), a pipeline slower than Kinesis, and a line per record.
const backlogYAML = `
http: { enabled: %t, address: '127.0.0.1:%d', debug_endpoints: %t }
logger: { level: %s, format: logfmt }
input:
  kinesis:
    streams: [ %s ]
    region: %s
    endpoint: %s
    credentials: { id: %s, secret: %s }
    checkpoint:
      redis: { url: '%s' }
      group: %s
%spipeline:
  processors:
    # sleep sleeps for each message: once per batch here, at its first.
    - sleep: { duration: '${! if batch_index() == 0 { "%s" } else { "0s" } }' }
    - mapping: 'root = "r"'
output:
  file: { path: %s, codec: lines }
`

// budgetLine finds the budget the input chose in its INFO line.
var budgetLine = regexp.MustCompile(`byte budget is ([0-9.]+)MiB`)

// backlogRun runs one process for f.duration, with GOMEMLIMIT limit (0:
// none), and reads its peak RSS (VmHWM), the records it passed and the
// budget it logged.
func backlogRun(ctx context.Context, dir string, s backlogSide, stream, group, endpoint, redisURL string, limit int64, f backlogFlags) (backlogRun1, error) {
	out := filepath.Join(dir, group+".out")
	conf := filepath.Join(dir, group+".yaml")
	prof := f.profileDir != ""
	yaml := fmt.Sprintf(backlogYAML, prof, debugPort, prof, f.logLevel, stream, testenv.Region, endpoint, testenv.AccessKey, testenv.SecretKey, redisURL, group, s.fields, f.sleep, out)
	if err := os.WriteFile(conf, []byte(yaml), 0o600); err != nil {
		return backlogRun1{}, err
	}
	logPath := filepath.Join(dir, group+".log")
	logf, err := os.Create(logPath)
	if err != nil {
		return backlogRun1{}, err
	}
	defer logf.Close()
	logs := func() string { b, _ := os.ReadFile(logPath); return string(b) }
	cmd := exec.CommandContext(ctx, s.bin, "-c", conf)
	cmd.Stdout, cmd.Stderr = logf, logf
	cmd.Env = os.Environ()
	if limit > 0 {
		cmd.Env = append(cmd.Env, fmt.Sprintf("GOMEMLIMIT=%dMiB", limit>>20))
	} else {
		// No limit at all: the binary reads no container limit either.
		cmd.Env = append(cmd.Env, "GOMEMLIMIT=", "AUTOMEMLIMIT=off")
	}
	if err := cmd.Start(); err != nil {
		return backlogRun1{}, err
	}
	var once sync.Once
	wait := func() { once.Do(func() { _ = cmd.Wait() }) }
	defer func() { _ = cmd.Process.Kill(); wait() }()
	if prof {
		// The heap at the peak RSS, and the process' log (with
		// GODEBUG=gctrace=1 in the bench's environment, its collections).
		go func() {
			if err := backlogHeapAtPeak(ctx, cmd.Process.Pid, filepath.Join(f.profileDir, group)); err != nil {
				fmt.Fprintf(os.Stderr, "bench backlog: %s: %v\n", group, err)
			}
		}()
		defer func() { _ = os.WriteFile(filepath.Join(f.profileDir, group+".log"), []byte(logs()), 0o600) }()
	}
	if err := sleepCtx(ctx, f.duration); err != nil {
		return backlogRun1{}, err
	}
	hwm, err := procHWM(cmd.Process.Pid)
	if err != nil {
		return backlogRun1{}, fmt.Errorf("%w; its log:\n%s", err, logs())
	}
	lines, err := countLines(out, map[string]int{})
	if err != nil {
		return backlogRun1{}, err
	}
	if lines == 0 {
		fmt.Fprintf(os.Stderr, "bench backlog: %s passed no record; its log:\n%s\n", group, logs())
	}
	_ = cmd.Process.Signal(syscall.SIGTERM)
	done := make(chan struct{})
	go func() { wait(); close(done) }()
	select {
	case <-done:
	case <-time.After(30 * time.Second):
	}
	var budget int64
	if m := budgetLine.FindStringSubmatch(logs()); m != nil {
		v, _ := strconv.ParseFloat(m[1], 64)
		budget = int64(v * (1 << 20))
	}
	return backlogRun1{peakRSS: hwm, rate: float64(lines) / f.duration.Seconds(), budget: budget, liveMB: maxLiveHeap(logs())}, nil
}

// gcLine finds a collection's heap sizes in a GODEBUG=gctrace=1 line:
// before -> after -> live, in MB.
var gcLine = regexp.MustCompile(`(\d+)->(\d+)->(\d+) MB`)

// maxLiveHeap is the largest live heap a collection left, in MB, from the
// process' log when the bench runs with GODEBUG=gctrace=1 (passed on to
// the process); 0 without.
func maxLiveHeap(log string) int {
	most := 0
	for _, m := range gcLine.FindAllStringSubmatch(log, -1) {
		v, _ := strconv.Atoi(m[3])
		most = max(most, v)
	}
	return most
}

// procHWM is the peak resident set size of process pid (VmHWM).
func procHWM(pid int) (uint64, error) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return 0, fmt.Errorf("reading the peak RSS of process %d: %w", pid, err)
	}
	for _, line := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(line, "VmHWM:"); ok {
			kb, err := strconv.ParseUint(strings.TrimSuffix(strings.TrimSpace(v), " kB"), 10, 64)
			return kb << 10, err
		}
	}
	return 0, fmt.Errorf("reading the peak RSS of process %d: no VmHWM line", pid)
}

// buildCommit builds cmd/connect-kinesis as of commit (git archive into
// dir), for a measurement against it.
func buildCommit(ctx context.Context, dir, commit string) (string, error) {
	root, err := testenv.RepoRoot()
	if err != nil {
		return "", err
	}
	src := filepath.Join(dir, "src-"+commit)
	if err := os.MkdirAll(src, 0o755); err != nil {
		return "", err
	}
	archive := exec.CommandContext(ctx, "sh", "-c", fmt.Sprintf("git -C %q archive %q | tar -x -C %q", root, commit, src))
	archive.Stderr = os.Stderr
	if err := archive.Run(); err != nil {
		return "", fmt.Errorf("extracting %s: %w", commit, err)
	}
	fmt.Fprintf(os.Stderr, "bench backlog: building connect-kinesis at %s...\n", commit)
	bin := filepath.Join(dir, "connect-kinesis-"+commit)
	build := exec.CommandContext(ctx, "go", "build", "-o", bin, "./cmd/connect-kinesis")
	build.Dir = src
	build.Stdout, build.Stderr = os.Stderr, os.Stderr
	if err := build.Run(); err != nil {
		return "", fmt.Errorf("building %s: %w", commit, err)
	}
	return bin, nil
}

// backlogHeapAtPeak follows the RSS of process pid and writes, at the
// highest RSS seen, its heap profile (path.heap) and the runtime's memory
// statistics with the profile's text (path.memstats), from the process'
// pprof endpoint.
func backlogHeapAtPeak(ctx context.Context, pid int, path string) error {
	var best uint64
	var heap, stats []byte
	for {
		rss, err := procRSS(pid)
		if err != nil {
			break // the process ended
		}
		if rss > best+(2<<20) {
			h, err1 := fetchHeap(ctx)
			t, err2 := httpGet(ctx, fmt.Sprintf("http://127.0.0.1:%d/debug/pprof/heap?debug=1", debugPort))
			if err1 == nil && err2 == nil {
				best, heap, stats = rss, h, t
			}
		}
		time.Sleep(50 * time.Millisecond)
	}
	if heap == nil {
		return fmt.Errorf("no profile taken")
	}
	// The runtime's statistics are at the end of the text profile.
	if i := strings.Index(string(stats), "\n# runtime.MemStats"); i >= 0 {
		stats = stats[i:]
	}
	fmt.Fprintf(os.Stderr, "bench backlog: heap profile taken at RSS %.0f MiB: %s.heap\n", mib(best), path)
	if err := os.WriteFile(path+".memstats", []byte(fmt.Sprintf("RSS %d\n%s", best, stats)), 0o600); err != nil {
		return err
	}
	return os.WriteFile(path+".heap", heap, 0o600)
}
