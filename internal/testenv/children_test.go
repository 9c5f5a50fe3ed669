package testenv

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// helperOutEnv, when set, turns TestIntegrationChildrenDieWithTheirParent
// into the helper it runs as a child: start services, list their PIDs in
// the named file, and wait to be killed.
const helperOutEnv = "TESTENV_HELPER_PIDS_FILE"

// A test binary killed with SIGKILL runs no cleanup; its services must die
// with it anyway (a leftover Redis heartbeated for 34 minutes after a chaos
// run). Some are started from goroutines whose threads then exit, as Go
// threads do: a child must outlive that thread, since Pdeathsig fires on the
// death of the forking thread, not of the process.
func TestIntegrationChildrenDieWithTheirParent(t *testing.T) {
	if out := os.Getenv(helperOutEnv); out != "" {
		startServicesAndWait(t, out)
		return
	}
	t.Parallel()
	pidsFile := filepath.Join(t.TempDir(), "pids")
	helper := exec.Command(os.Args[0], "-test.run=^TestIntegrationChildrenDieWithTheirParent$", "-test.count=1")
	helper.Env = append(os.Environ(), helperOutEnv+"="+pidsFile)
	var helperOut strings.Builder
	helper.Stdout, helper.Stderr = &helperOut, &helperOut
	require.NoError(t, StartCommand("testenv-helper", helper))
	exited := make(chan struct{})
	go func() { _ = helper.Wait(); close(exited) }()
	t.Cleanup(func() { _ = helper.Process.Kill(); <-exited })

	var children []recordedChild
	require.Eventually(t, func() bool {
		children = readChildren(pidsFile)
		select {
		case <-exited:
			return true
		default:
			return children != nil
		}
	}, 2*time.Minute, 50*time.Millisecond)
	require.NotNil(t, children, "the helper exited before listing its services:\n%s", &helperOut)
	t.Cleanup(func() { // a failing run must not leak what it checks for
		for _, c := range children {
			for _, pid := range StillRunning(c.pid, c.start) {
				_ = syscall.Kill(pid, syscall.SIGKILL)
			}
		}
	})
	require.Len(t, children, 6)
	assert.Never(t, func() bool {
		for _, c := range children {
			if len(StillRunning(c.pid, c.start)) == 0 {
				return true
			}
		}
		return false
	}, 500*time.Millisecond, 50*time.Millisecond, "a service died while its parent lived: %v", children)

	require.NoError(t, helper.Process.Kill())
	<-exited
	assert.Eventually(t, func() bool {
		for _, c := range children {
			if len(StillRunning(c.pid, c.start)) > 0 {
				return false
			}
		}
		return true
	}, 15*time.Second, 50*time.Millisecond, "services outlived the killed test binary")
	for _, c := range children {
		assert.Empty(t, StillRunning(c.pid, c.start), "%s pid %d and its group", c.name, c.pid)
	}
}

type recordedChild struct {
	name  string
	pid   int
	start uint64
}

func readChildren(file string) []recordedChild {
	b, err := os.ReadFile(file)
	if err != nil || !strings.HasSuffix(string(b), "done\n") {
		return nil
	}
	var out []recordedChild
	for _, line := range strings.Split(strings.TrimSuffix(string(b), "done\n"), "\n") {
		var c recordedChild
		if _, err := fmt.Sscanf(line, "%s %d %d", &c.name, &c.pid, &c.start); err == nil {
			out = append(out, c)
		}
	}
	return out
}

// startServicesAndWait is the helper: it never returns; the test kills it.
func startServicesAndWait(t *testing.T, out string) {
	ctx := t.Context()
	var procs []*Process
	// Three, each from its own goroutine: the runtime may wedge a thread
	// rather than end it (the main thread), so one alone could survive
	// even a Pdeathsig tied to the starting thread.
	for range 3 {
		fromDyingThread := make(chan error, 1)
		go func() {
			runtime.LockOSThread() // never unlocked: the thread ends with the goroutine
			r, err := StartRedis(ctx, RedisOptions{})
			if err == nil {
				procs = append(procs, r.Process())
			}
			fromDyingThread <- err
		}()
		require.NoError(t, <-fromDyingThread)
	}
	lite, err := StartKinesalite(ctx)
	require.NoError(t, err)
	mock, err := StartKinesisMock(ctx)
	require.NoError(t, err)
	dyn, err := StartDynalite(ctx)
	require.NoError(t, err)
	procs = append(procs, lite.Process(), mock.Process(), dyn.Process())

	var b strings.Builder
	for _, p := range procs {
		start, err := startTime(p.PID())
		require.NoError(t, err, "%s exited early:\n%s", p.Name, p.Output())
		fmt.Fprintf(&b, "%s %d %d\n", p.Name, p.PID(), start)
	}
	b.WriteString("done\n")
	require.NoError(t, os.WriteFile(out, []byte(b.String()), 0o600))
	select {}
}

// After a test's cleanup every process testenv started for it has ended,
// each service kind and the processes in its group alike.
func TestIntegrationCleanupEndsEveryChild(t *testing.T) {
	t.Parallel()
	var started []*Process
	t.Run("services", func(t *testing.T) {
		r := NewRedis(t)
		s := NewSentinel(t, r)
		cl := NewRedisCluster(t)
		k := NewKinesalite(t)
		d := NewDynalite(t)
		p := NewPrometheus(t, "global:\n  scrape_interval: 1m\n")
		started = append(started, r.Process(), s.proc, k.Process(), d.Process(), p.proc)
		for _, n := range cl.Nodes {
			started = append(started, n.Process())
		}
		for _, proc := range started {
			assert.NotEmpty(t, StillRunning(proc.PID(), 0), "%s not running during the test", proc.Name)
		}
	})
	require.Len(t, started, 8)
	for _, proc := range started {
		assert.Empty(t, StillRunning(proc.PID(), 0), "%s pid %d after cleanup", proc.Name, proc.PID())
	}
}

// Leftovers reports a recorded child that still runs and ignores one that
// ended or whose PID another process has taken since.
func TestLeftoversListsRunningChildren(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	record := func(name string, pid int, start uint64) {
		line := fmt.Sprintf("%s %d\n", name, start)
		require.NoError(t, os.WriteFile(filepath.Join(dir, fmt.Sprint(pid)), []byte(line), 0o600))
	}
	ended := exec.Command("true")
	require.NoError(t, StartCommand("ended", ended))
	require.NoError(t, ended.Wait())
	record("ended", ended.Process.Pid, 1)
	self, err := startTime(os.Getpid())
	require.NoError(t, err)
	record("reused", os.Getpid(), self+1) // a child that ended, its PID now ours

	alive := exec.Command("sleep", "60")
	require.NoError(t, StartCommand("alive", alive))
	t.Cleanup(func() { _ = alive.Process.Kill(); _ = alive.Wait() })
	start, err := startTime(alive.Process.Pid)
	require.NoError(t, err)
	record("alive", alive.Process.Pid, start)

	left, recorded, err := Leftovers(dir)
	require.NoError(t, err)
	assert.Equal(t, 3, recorded)
	assert.Equal(t, []Leftover{{Name: "alive", Child: alive.Process.Pid, PID: alive.Process.Pid}}, left)

	require.NoError(t, alive.Process.Kill())
	_ = alive.Wait()
	left, _, err = Leftovers(dir)
	require.NoError(t, err)
	assert.Empty(t, left)
}
