// Package testenv starts the real services the project's tests, demo and
// benchmarks run against: kinesis-mock and kinesalite (npm packages installed
// by `make deps` under .deps/npm) and redis-server, each a child process on a
// free 127.0.0.1 port, stopped by its own PID. Every child dies with the
// process that started it (see startChild) and is recorded where `make test`
// checks that none outlived the run (see PIDsDirEnv).
//
// Functions taking a testing.TB register cleanup and, when a service is not
// installed, skip the test with a message naming `make deps` — except under
// CI=true, where a missing service fails the test instead of hiding it.
// The Start* functions without a TB are for programs (demo, bench, chaos).
package testenv

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

// errExitedEarly marks a service that died while starting, or was killed
// because it could not bind a port: most often a port race (another process
// bound the free port first), so starting again on new ports is worth a try.
var errExitedEarly = errors.New("exited before it was ready")

// startAttempts is how often a service start is tried on fresh ports.
const startAttempts = 3

// retryStart calls start until it succeeds, fails for another reason than
// an early exit, or has been tried startAttempts times.
func retryStart[T any](start func() (T, error)) (T, error) {
	var (
		v   T
		err error
	)
	for i := 0; i < startAttempts; i++ {
		if v, err = start(); err == nil || !errors.Is(err, errExitedEarly) {
			return v, err
		}
	}
	return v, err
}

// ErrNotInstalled says a service's program is missing; run `make deps`.
var ErrNotInstalled = errors.New("not installed: run `make deps`")

// InCI reports whether CI=true is set, where missing services fail tests.
func InCI() bool { return os.Getenv("CI") == "true" }

// Require skips (or, under CI, fails) the test when err says a service is
// not installed, and fails it on any other error.
func Require(tb testing.TB, what string, err error) {
	tb.Helper()
	if err == nil {
		return
	}
	if errors.Is(err, ErrNotInstalled) && !InCI() {
		tb.Skipf("%s: %v", what, err)
	}
	tb.Fatalf("%s: %v", what, err)
}

// RepoRoot returns the folder holding go.mod, found from the working
// directory upwards (tests run in their package folder).
func RepoRoot() (string, error) {
	dir, err := os.Getwd()
	if err != nil {
		return "", err
	}
	for {
		if _, err := os.Stat(filepath.Join(dir, "go.mod")); err == nil {
			return dir, nil
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			return "", errors.New("finding the repository root: no go.mod above the working directory")
		}
		dir = parent
	}
}

// nodePackage finds node and the npm package pkg that `make deps` installs,
// checking that its file exists; what names the package in the error.
func nodePackage(pkg, file, what string) (node, nodeModules string, err error) {
	if node, err = lookPath("node"); err != nil {
		return "", "", err
	}
	if nodeModules, err = NodeModules(); err != nil {
		return "", "", err
	}
	if _, err := os.Stat(filepath.Join(nodeModules, pkg, file)); err != nil {
		return "", "", fmt.Errorf("%s in %s %w", what, nodeModules, ErrNotInstalled)
	}
	return node, nodeModules, nil
}

// NodeModules returns the folder `make deps` installs npm packages into.
// CONNECT_KINESIS_DEPS overrides it.
func NodeModules() (string, error) {
	if d := os.Getenv("CONNECT_KINESIS_DEPS"); d != "" {
		return filepath.Join(d, "npm", "node_modules"), nil
	}
	root, err := RepoRoot()
	if err != nil {
		return "", err
	}
	return filepath.Join(root, ".deps", "npm", "node_modules"), nil
}

// FreePort asks the kernel for a free TCP port on 127.0.0.1.
func FreePort() (int, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, fmt.Errorf("finding a free port: %w", err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port, nil
}

// Process is a child process started by this package.
type Process struct {
	Name string
	cmd  *exec.Cmd
	out  *syncBuffer
	done chan struct{}
	err  error
}

type syncBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *syncBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	// Keep the tail only: a long test must not grow memory with logs.
	if b.buf.Len() > 1<<20 {
		tail := append([]byte(nil), b.buf.Bytes()[b.buf.Len()-(256<<10):]...)
		b.buf.Reset()
		b.buf.Write(tail)
	}
	return b.buf.Write(p)
}

func (b *syncBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

func startProcess(name string, env []string, dir string, prog string, args ...string) (*Process, error) {
	cmd := exec.Command(prog, args...)
	cmd.Env = append(os.Environ(), env...)
	cmd.Dir = dir
	out := &syncBuffer{}
	cmd.Stdout = out
	cmd.Stderr = out
	if err := startChild(name, cmd); err != nil {
		return nil, fmt.Errorf("starting %s: %w", name, err)
	}
	p := &Process{Name: name, cmd: cmd, out: out, done: make(chan struct{})}
	go func() {
		p.err = cmd.Wait()
		close(p.done)
	}()
	return p, nil
}

// PID is the process id.
func (p *Process) PID() int { return p.cmd.Process.Pid }

// Output returns what the process printed so far (its last 1 MiB at most).
func (p *Process) Output() string { return p.out.String() }

// Done is closed when the process has ended; Err then says how.
func (p *Process) Done() <-chan struct{} { return p.done }

// Err is how the process ended (nil for exit status 0), once Done is
// closed; nil before.
func (p *Process) Err() error {
	select {
	case <-p.done:
		return p.err
	default:
		return nil
	}
}

// Exited reports whether the process has ended.
func (p *Process) Exited() bool {
	select {
	case <-p.done:
		return true
	default:
		return false
	}
}

// Signal sends sig to the process group.
func (p *Process) Signal(sig syscall.Signal) error {
	return syscall.Kill(-p.cmd.Process.Pid, sig)
}

// Stop sends SIGTERM, waits up to grace, then SIGKILLs. It is idempotent.
func (p *Process) Stop(grace time.Duration) {
	if p.Exited() {
		return
	}
	_ = p.Signal(syscall.SIGCONT) // a paused process cannot handle SIGTERM
	_ = p.Signal(syscall.SIGTERM)
	select {
	case <-p.done:
		return
	case <-time.After(grace):
	}
	_ = p.Signal(syscall.SIGKILL)
	<-p.done
}

// Kill sends SIGKILL and waits for the process to end.
func (p *Process) Kill() {
	if p.Exited() {
		return
	}
	_ = p.Signal(syscall.SIGKILL)
	<-p.done
}

// waitReady polls check until it succeeds, the process exits, or timeout.
// Start-up polling is the one place a loop waits on a condition: a child
// process offers no event to wait on.
func waitReady(ctx context.Context, p *Process, timeout time.Duration, check func(context.Context) error) error {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	tick := time.NewTicker(50 * time.Millisecond)
	defer tick.Stop()
	var last error
	for {
		if last = check(ctx); last == nil {
			return nil
		}
		if portTaken(p.Output()) {
			// Node's servers (kinesis-mock, kinesalite, dynalite) log a port
			// they could not bind and may go on running without it: waiting
			// would only time out, while new ports are a retry away.
			p.Kill()
			return fmt.Errorf("%s %w: a port it was given was taken before it bound it; output:\n%s", p.Name, errExitedEarly, p.Output())
		}
		select {
		case <-p.done:
			return fmt.Errorf("%s %w (%v); output:\n%s", p.Name, errExitedEarly, p.err, p.Output())
		case <-ctx.Done():
			p.Kill()
			return fmt.Errorf("%s not ready after %v: %v; output:\n%s", p.Name, timeout, last, p.Output())
		case <-tick.C:
		}
	}
}

// portTaken reports whether a process's output says it could not bind a
// port because another process had taken it (Node's "listen EADDRINUSE").
func portTaken(output string) bool {
	return strings.Contains(output, "EADDRINUSE")
}

func lookPath(prog string) (string, error) {
	path, err := exec.LookPath(prog)
	if err != nil {
		return "", fmt.Errorf("%s %w", prog, ErrNotInstalled)
	}
	return path, nil
}

func itoa(n int) string { return strconv.Itoa(n) }
