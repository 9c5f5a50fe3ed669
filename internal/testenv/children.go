package testenv

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"syscall"
)

// PIDsDirEnv names the folder where every child this package starts is
// recorded (one file per child, named by its PID), so that `make test` can
// check after the run that none of them is still alive (see Leftovers).
const PIDsDirEnv = "CONNECT_KINESIS_PIDS_DIR"

// Every child gets a parent-death signal: if the test binary is killed
// (a timeout, Ctrl-C twice, SIGKILL), the kernel kills the child too instead
// of leaving a Redis or an emulator running for hours. Linux sends it when
// the *thread* that forked the child exits, not the process, and the Go
// runtime ends idle threads whenever it likes; so every child is forked by
// one goroutine locked to its own thread, which never returns.
var (
	spawnOnce sync.Once
	spawns    = make(chan spawnRequest)
)

type spawnRequest struct {
	cmd  *exec.Cmd
	done chan error
}

// StartCommand starts cmd the way this package starts its services: in its
// own process group, killed by the kernel if this process dies, and recorded
// under PIDsDirEnv. The caller still ends it (kill the group, then Wait) on
// every path; tests that run a binary of their own use it too.
func StartCommand(name string, cmd *exec.Cmd) error { return startChild(name, cmd) }

// startChild starts cmd in its own process group with SIGKILL as its
// parent-death signal, from the spawning thread, and records its PID.
func startChild(name string, cmd *exec.Cmd) error {
	if cmd.SysProcAttr == nil {
		cmd.SysProcAttr = &syscall.SysProcAttr{}
	}
	// Its own process group, so a signal to the test binary's group (Ctrl-C)
	// does not race our orderly stop, and Stop reaches node's children too.
	cmd.SysProcAttr.Setpgid = true
	cmd.SysProcAttr.Pdeathsig = syscall.SIGKILL
	spawnOnce.Do(func() { go spawner() })
	req := spawnRequest{cmd: cmd, done: make(chan error, 1)}
	spawns <- req
	if err := <-req.done; err != nil {
		return err
	}
	if err := recordChild(name, cmd.Process.Pid); err != nil {
		// The record is what lets `make test` prove nothing leaked: a child
		// that cannot be recorded is not left running unrecorded.
		_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
		_ = cmd.Wait()
		return err
	}
	return nil
}

// spawner forks every child. It locks its goroutine to its thread and never
// unlocks or returns, so the thread (the children's "parent" for
// Pdeathsig) lives as long as the process.
func spawner() {
	runtime.LockOSThread()
	for req := range spawns {
		req.done <- req.cmd.Start()
	}
}

// recordChild writes "<name> <start time>" into PIDsDirEnv/<pid> when that
// variable is set. The start time (from /proc) tells a child from a later
// process that reused its PID.
func recordChild(name string, pid int) error {
	dir := os.Getenv(PIDsDirEnv)
	if dir == "" {
		return nil
	}
	start, err := startTime(pid)
	if err != nil {
		// The child already exited: nothing to check later.
		return nil //nolint:nilerr // a child gone before recording cannot leak
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return fmt.Errorf("recording child %s (pid %d): %w", name, pid, err)
	}
	line := fmt.Sprintf("%s %d\n", name, start)
	if err := os.WriteFile(filepath.Join(dir, strconv.Itoa(pid)), []byte(line), 0o644); err != nil {
		return fmt.Errorf("recording child %s (pid %d): %w", name, pid, err)
	}
	return nil
}

// procStat is what this package reads from /proc/<pid>/stat.
type procStat struct {
	state byte
	pgrp  int
	start uint64
}

// readStat parses /proc/<pid>/stat. The command name in parentheses may hold
// spaces, so fields are counted from the last ')'.
func readStat(pid int) (procStat, error) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return procStat{}, err
	}
	s := string(b)
	i := strings.LastIndexByte(s, ')')
	if i < 0 {
		return procStat{}, errors.New("reading /proc stat: no command name")
	}
	f := strings.Fields(s[i+1:])
	// f[0] is field 3 (state), f[2] field 5 (pgrp), f[19] field 22 (starttime).
	if len(f) < 20 {
		return procStat{}, errors.New("reading /proc stat: too few fields")
	}
	pgrp, err := strconv.Atoi(f[2])
	if err != nil {
		return procStat{}, fmt.Errorf("reading /proc stat pgrp: %w", err)
	}
	start, err := strconv.ParseUint(f[19], 10, 64)
	if err != nil {
		return procStat{}, fmt.Errorf("reading /proc stat starttime: %w", err)
	}
	return procStat{state: f[0][0], pgrp: pgrp, start: start}, nil
}

func startTime(pid int) (uint64, error) {
	st, err := readStat(pid)
	return st.start, err
}

// running reports whether st is a process that still runs: a zombie has
// ended and only waits for its parent (or init) to reap it.
func running(st procStat) bool { return st.state != 'Z' && st.state != 'X' }
