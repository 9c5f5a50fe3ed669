package main

import (
	"context"
	"fmt"
	"os"
	"slices"
	"time"

	"github.com/connect-kinesis/connect-kinesis/plugins/checkpointer"
)

// nodeDelta is what one Redis server did between two readings.
type nodeDelta struct {
	addr, role string
	total      int64            // commands, those run inside scripts included, the bench's INFO left out
	cmds       map[string]int64 // per command, the bench's INFO left out
	cpu        time.Duration
}

// nodeDeltas are every server's deltas over one window.
type nodeDeltas []nodeDelta

// notClients are commands no input sends: REPLCONF is a replica's
// acknowledgement to its master (one a second, whatever the load) and INFO
// is the bench's own reading. They are left out of every figure.
var notClients = []string{"replconf", "info"}

// diffNodes is b - a, node by node, the commands of notClients left out
// (each reading's INFO is one command counted in the next reading's total).
func diffNodes(a, b []nodeStats) nodeDeltas {
	out := make(nodeDeltas, len(b))
	for i := range b {
		d := nodeDelta{addr: b[i].addr, role: b[i].role, total: b[i].total - a[i].total - 1, cmds: map[string]int64{}, cpu: b[i].cpu - a[i].cpu}
		for name, n := range b[i].cmds {
			n -= a[i].cmds[name]
			if slices.Contains(notClients, name) {
				if name == "replconf" {
					d.total -= n
				}
				continue
			}
			if n > 0 {
				d.cmds[name] = n
			}
		}
		out[i] = d
	}
	return out
}

// scriptCommands are the commands that run a Lua script: each is one
// round trip however many commands the script runs.
var scriptCommands = []string{"evalsha", "eval", "evalsha_ro", "eval_ro"}

func (d nodeDeltas) masterTotal() int64 {
	var n int64
	for _, x := range d {
		if x.role == "master" {
			n += x.total
		}
	}
	return n
}

// masterScripts counts the script calls on the masters: the clients'
// round trips that mutate or read the group's state.
func (d nodeDeltas) masterScripts() int64 {
	var n int64
	for _, x := range d {
		if x.role == "master" {
			for _, c := range scriptCommands {
				n += x.cmds[c]
			}
		}
	}
	return n
}

// masterCmds sums one command's calls over the masters.
func (d nodeDeltas) masterCmds() map[string]int64 {
	out := map[string]int64{}
	for _, x := range d {
		if x.role == "master" {
			for name, n := range x.cmds {
				out[name] += n
			}
		}
	}
	return out
}

// busiest is the node that ran the most commands.
func (d nodeDeltas) busiest() nodeDelta {
	var b nodeDelta
	for _, x := range d {
		if x.total > b.total {
			b = x
		}
	}
	return b
}

// idleFigures is what the group cost over an idle window.
type idleFigures struct {
	window   time.Duration
	shards   []int // per process, at the window's end
	procCPU  []time.Duration
	procRSS  []uint64
	kinCPU   time.Duration // the Kinesis server's, when it is a process of its own
	benchCPU time.Duration // the bench's: the counting proxy, or the simulator
	calls    map[string]int64
	redis    nodeDeltas
}

// measureIdle measures the group's processes, the Kinesis and every Redis
// node over window.
func (e *scaleEnv) measureIdle(ctx context.Context, stores map[string]*checkpointer.Store, window time.Duration) (*idleFigures, error) {
	cpu := func() ([]time.Duration, error) {
		out := make([]time.Duration, len(e.procs)+1)
		for i, p := range e.procs {
			var err error
			if out[i], err = procCPU(p.cmd.Process.Pid); err != nil {
				return nil, err
			}
		}
		if pid := e.kin.PID(); pid != 0 {
			var err error
			if out[len(e.procs)], err = procCPU(pid); err != nil {
				return nil, err
			}
		}
		return out, nil
	}
	cpu0, err := cpu()
	if err != nil {
		return nil, err
	}
	bench0 := cpuTime()
	red0, err := e.red.stats(ctx)
	if err != nil {
		return nil, err
	}
	calls0 := e.kin.Calls()
	start := time.Now()
	profiled := e.profileCPU(ctx, window)
	if err := sleepCtx(ctx, window); err != nil {
		return nil, err
	}
	if err := <-profiled; err != nil {
		fmt.Fprintf(os.Stderr, "bench scale: CPU profile: %v\n", err)
	}
	calls1 := e.kin.Calls()
	red1, err := e.red.stats(ctx)
	if err != nil {
		return nil, err
	}
	fig := &idleFigures{window: time.Since(start), calls: map[string]int64{}, redis: diffNodes(red0, red1)}
	cpu1, err := cpu()
	if err != nil {
		return nil, err
	}
	fig.benchCPU = cpuTime() - bench0
	fig.kinCPU = cpu1[len(e.procs)] - cpu0[len(e.procs)]
	for op, n := range calls1 {
		if d := n - calls0[op]; d > 0 {
			fig.calls[op] = d
		}
	}
	if err := checkAlive(e.procs); err != nil {
		return nil, err
	}
	v, err := readLeases(ctx, stores)
	if err != nil {
		return nil, err
	}
	fig.shards = v.counts(e.procs)
	for i, p := range e.procs {
		fig.procCPU = append(fig.procCPU, cpu1[i]-cpu0[i])
		rss, err := procRSS(p.cmd.Process.Pid)
		if err != nil {
			return nil, err
		}
		fig.procRSS = append(fig.procRSS, rss)
	}
	return fig, nil
}

// profileCPU fetches, over window, a CPU profile of the first process
// when it serves pprof (-cpu-profile), into the flag's file; the channel
// gives the outcome (at once when there is nothing to profile).
func (e *scaleEnv) profileCPU(ctx context.Context, window time.Duration) <-chan error {
	out := make(chan error, 1)
	if e.f.cpuProfile == "" || len(e.procs) == 0 || e.procs[0].debugPort == 0 {
		out <- nil
		return out
	}
	url := fmt.Sprintf("http://127.0.0.1:%d/debug/pprof/profile?seconds=%d", e.procs[0].debugPort, int(window.Seconds()))
	go func() {
		b, err := httpGet(ctx, url)
		if err == nil {
			err = os.WriteFile(e.f.cpuProfile, b, 0o600)
		}
		out <- err
	}()
	return out
}
