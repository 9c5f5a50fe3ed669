package main

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"flag"
	"fmt"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/connect-kinesis/connect-kinesis/internal/testenv"
)

func init() {
	parts["scale"] = part{
		summary: "issue 61's scale table: one stream of many shards and many streams found by a pattern, read by many processes of the real binary on a Redis Cluster; start, idle minute, failover, rolling restart, and KCL 3.x's lease table as a model",
		run:     runScale,
	}
}

type scaleFlags struct {
	shards, procs            int
	streams, streamShards    int
	kill                     int
	loadPercent              float64
	bin, idlePoll, kinesisBE string
	redisKind, balance       string
	spread, settle, idle     time.Duration
	multiIdle, loadEvery     time.Duration
	timeout, stepTimeout     time.Duration
	stepQuiet                time.Duration
	// cpuProfile, when set, is the file for a CPU profile of the first
	// process over the one stream's idle window, from its pprof endpoint.
	cpuProfile string
	// nodeTimeout is the Cluster's cluster-node-timeout; keep keeps the
	// run's folder (configs, logs) whatever the outcome.
	nodeTimeout time.Duration
	keep        bool
	// nice is the instances' nice value (see the flag).
	nice int
}

const (
	scaleStream      = "bench-scale"
	scaleGroup       = "scale"
	scaleMultiPrefix = "bench-scale-m-"
	scaleMultiGroup  = "scale-multi"
)

func runScale(ctx context.Context, args []string) (err error) {
	var f scaleFlags
	fs := flag.NewFlagSet("scale", flag.ContinueOnError)
	fs.IntVar(&f.shards, "shards", 10000, "shards of the one stream")
	fs.IntVar(&f.procs, "procs", 20, "input processes (the real binary) sharing the group")
	fs.IntVar(&f.streams, "streams", 100, "streams found by a pattern in the second start (0: skip it)")
	fs.IntVar(&f.streamShards, "stream-shards", 100, "shards of each of those streams")
	fs.IntVar(&f.kill, "kill", 2, "processes SIGKILLed in the failover (0: skip it)")
	fs.Float64Var(&f.loadPercent, "load-percent", 5, "percent of the one stream's shards under the keyed load of the rolling restart (0: skip the rolling restart)")
	fs.DurationVar(&f.loadEvery, "load-every", time.Second, "the keyed load writes one record to each loaded shard this often")
	fs.StringVar(&f.bin, "bin", "", "connect-kinesis binary to run (default: build ./cmd/connect-kinesis into a temporary directory)")
	fs.StringVar(&f.kinesisBE, "kinesis", "sim", "the Kinesis the inputs read: "+backendNames()+" (kinesalite saturates near 2,000 shards on a 2-core machine; the simulator serves the target size)")
	fs.StringVar(&f.redisKind, "redis", "cluster", "the checkpoint store: cluster (3 masters, 3 replicas) or single")
	fs.StringVar(&f.balance, "balance", "", "lease.balance of the inputs (empty: the input's default)")
	fs.StringVar(&f.idlePoll, "idle-poll-interval", "5s", "idle_poll_interval of the inputs; at the input's default (1s) 2,000 idle shards saturate kinesalite on a 2-core machine")
	fs.DurationVar(&f.spread, "spread", 10*time.Second, "the processes are started evenly over this long")
	fs.DurationVar(&f.settle, "settle", 15*time.Second, "wait after balancing before the idle window")
	fs.DurationVar(&f.idle, "idle", time.Minute, "idle window of the one stream, over which CPU, Redis and Kinesis calls are measured")
	fs.DurationVar(&f.multiIdle, "multi-idle", 30*time.Second, "idle window of the many streams (0: skip it)")
	fs.DurationVar(&f.timeout, "timeout", 10*time.Minute, "longest wait for every shard owned and balanced, and for the keyed load's delivery")
	fs.DurationVar(&f.stepTimeout, "step-timeout", time.Minute, "longest wait, per restart of the rolling restart, for the group to settle again")
	fs.DurationVar(&f.stepQuiet, "step-quiet", 20*time.Second, "a restart of the rolling restart has settled once the group is balanced by count, or once every shard is owned and no lease has changed hands for this long (lease.balance load evens bytes, not counts); the default is two balancing periods")
	fs.DurationVar(&f.nodeTimeout, "cluster-node-timeout", 15*time.Second, "cluster-node-timeout of the Redis Cluster: Redis's default; at 2 s a master slowed by the run's load is failed over mid-measurement (CLUSTERDOWN)")
	fs.IntVar(&f.nice, "nice", 10, "nice value of the instances, below the Redis nodes and the Kinesis simulator, which stand in for services on hosts of their own: with more instances than cores at 0, Redis gets a thread's share of the CPU, its calls outlast the renewals' time and whole instances' leases lapse")
	fs.BoolVar(&f.keep, "keep", false, "keep the run's folder (each process's config and log) after a passing run too; a failing run always keeps it")
	fs.StringVar(&f.cpuProfile, "cpu-profile", "", "write a CPU profile of the first process over the one stream's idle window to this file (its http server's pprof endpoint, on a free loopback port)")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if f.procs < 1 || f.shards < f.procs || f.kill >= f.procs {
		return fmt.Errorf("want 0 <= -kill < -procs <= -shards (have %d, %d, %d)", f.kill, f.procs, f.shards)
	}
	startBE, ok := scaleBackends[f.kinesisBE]
	if !ok {
		return fmt.Errorf("-kinesis %q: want one of %s", f.kinesisBE, backendNames())
	}
	dir, err := os.MkdirTemp("", "bench-scale-")
	if err != nil {
		return err
	}
	defer func() {
		// A failing run's process logs are what explains it.
		if err != nil || f.keep {
			fmt.Fprintf(os.Stderr, "bench scale: the run's configs and logs are kept in %s\n", dir)
			return
		}
		os.RemoveAll(dir)
	}()
	if f.bin == "" {
		fmt.Fprintln(os.Stderr, "bench scale: building connect-kinesis...")
		if f.bin, err = buildBinary(ctx, dir); err != nil {
			return err
		}
	}
	kin, err := startBE(ctx, f.shards+f.streams*f.streamShards+100)
	if err != nil {
		return err
	}
	defer kin.Close()
	red, err := startScaleRedis(ctx, f.redisKind, f.nodeTimeout)
	if err != nil {
		return err
	}
	defer red.Close()

	env := &scaleEnv{f: f, dir: dir, kin: kin, red: red}
	defer env.stopAll()
	var t scaleTable
	// A run stopped early (a phase's timeout, an interrupt) still prints
	// the phases it measured: at the target size the whole run is long.
	partial := func(err error) error {
		if t.one != nil || t.oneIdle != nil || t.failover != nil {
			fmt.Fprintf(os.Stderr, "bench scale: stopped early (%v); the phases measured so far:\n", err)
			printScaleTable(f, kin, &t)
		}
		return err
	}
	if err := env.oneStream(ctx, &t); err != nil {
		return partial(err)
	}
	if f.streams > 0 {
		if err := env.manyStreams(ctx, &t); err != nil {
			return partial(err)
		}
	}
	printScaleTable(f, kin, &t)
	if t.rolling != nil && (t.rolling.lost > 0 || t.rolling.orderBroken > 0) {
		return fmt.Errorf("the rolling restart lost %d records and broke per-key order %d times", t.rolling.lost, t.rolling.orderBroken)
	}
	return nil
}

// buildBinary builds cmd/connect-kinesis into dir.
func buildBinary(ctx context.Context, dir string) (string, error) {
	root, err := testenv.RepoRoot()
	if err != nil {
		return "", err
	}
	bin := filepath.Join(dir, "connect-kinesis")
	cmd := exec.CommandContext(ctx, "go", "build", "-o", bin, "./cmd/connect-kinesis")
	cmd.Dir = root
	cmd.Stdout, cmd.Stderr = os.Stderr, os.Stderr
	if err := cmd.Run(); err != nil {
		return "", fmt.Errorf("building connect-kinesis: %w", err)
	}
	return bin, nil
}

func sleepCtx(ctx context.Context, d time.Duration) error {
	select {
	case <-time.After(d):
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// scaleProc is one input process: kinesis -> a file of lines. Each start
// (the first and every restart) writes a file of its own, so the order of a
// key's records can be checked within what one process delivered.
type scaleProc struct {
	name, owner string
	debugPort   int // the http server's port, with pprof; 0: no server
	conf, log   string
	dir, bin    string
	outs        []string // one per start, the current last
	cmd         *exec.Cmd
	done        chan struct{}
	nice        int
}

// scaleYAML is an input process: every record's data becomes a line of
// its output file. The instance id is set so the bench can tell the
// processes' leases apart; it is kept across restarts, as a pod's name is.
const scaleYAML = `
http: %s
logger: { level: warn, format: logfmt }
input:
  kinesis:
    streams: [ %s ]
    region: %s
    endpoint: %s
    credentials: { id: %s, secret: %s }
    idle_poll_interval: %s
    checkpoint:
      redis: { url: '%s', kind: %s }
      group: %s
    lease: { instance_id: %s%s }
output:
  file:
    path: ${OUT_FILE}
    codec: lines
`

// newScaleProc writes process i's config; start runs it.
func newScaleProc(dir, bin string, i int, stream, group, endpoint string, red *scaleRedis, f scaleFlags) (*scaleProc, error) {
	p := &scaleProc{
		name:  fmt.Sprintf("%s-%d", group, i+1),
		owner: fmt.Sprintf("bench-%s-%d", group, i+1),
		dir:   dir,
		bin:   bin,
		nice:  f.nice,
	}
	p.conf = filepath.Join(dir, p.name+".yaml")
	p.log = filepath.Join(dir, p.name+".log")
	balance := ""
	if f.balance != "" {
		balance = ", balance: " + f.balance
	}
	httpConf := "{ enabled: false }"
	if i == 0 && f.cpuProfile != "" && group == scaleGroup {
		port, err := testenv.FreePort()
		if err != nil {
			return nil, err
		}
		p.debugPort = port
		httpConf = fmt.Sprintf("{ enabled: true, address: '127.0.0.1:%d', debug_endpoints: true }", port)
	}
	yaml := fmt.Sprintf(scaleYAML, httpConf, stream, testenv.Region, endpoint, testenv.AccessKey, testenv.SecretKey, f.idlePoll,
		red.url, red.kind, group, p.owner, balance)
	if err := os.WriteFile(p.conf, []byte(yaml), 0o600); err != nil {
		return nil, err
	}
	return p, nil
}

// start runs the process with a fresh output file.
func (p *scaleProc) start() error {
	out := filepath.Join(p.dir, fmt.Sprintf("%s.out-%d", p.name, len(p.outs)+1))
	logf, err := os.OpenFile(p.log, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o600)
	if err != nil {
		return err
	}
	defer logf.Close()
	cmd := exec.Command(p.bin, "-c", p.conf)
	if p.nice != 0 {
		// nice execs the binary, so the PID (and every signal) is its.
		cmd = exec.Command("nice", "-n", strconv.Itoa(p.nice), p.bin, "-c", p.conf)
	}
	cmd.Env = append(os.Environ(), "OUT_FILE="+out)
	cmd.Stdout, cmd.Stderr = logf, logf
	if err := cmd.Start(); err != nil {
		return fmt.Errorf("starting %s: %w", p.bin, err)
	}
	p.outs = append(p.outs, out)
	p.cmd, p.done = cmd, make(chan struct{})
	done := p.done
	go func() {
		_ = cmd.Wait()
		close(done)
	}()
	return nil
}

func (p *scaleProc) exited() bool {
	if p.cmd == nil {
		return true
	}
	select {
	case <-p.done:
		return true
	default:
		return false
	}
}

// stop ends the process gracefully (it commits and releases), killing it
// after grace; it says whether the process ended within grace.
func (p *scaleProc) stop(grace time.Duration) bool {
	if p.exited() {
		return true
	}
	_ = p.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-p.done:
		return true
	case <-time.After(grace):
		_ = p.cmd.Process.Kill()
		<-p.done
		return false
	}
}

// kill ends the process with SIGKILL and waits for it.
func (p *scaleProc) kill() {
	if p.exited() {
		return
	}
	_ = p.cmd.Process.Kill()
	<-p.done
}

func (p *scaleProc) logTail() string {
	b, _ := os.ReadFile(p.log)
	if len(b) > 4000 {
		b = b[len(b)-4000:]
	}
	return string(b)
}

func checkAlive(procs []*scaleProc) error {
	for _, p := range procs {
		if p.exited() {
			return fmt.Errorf("%s exited early; its log ends:\n%s", p.name, p.logTail())
		}
	}
	return nil
}

// countLines adds the complete lines of the file at path to seen and
// returns how many there were; a missing file has none.
func countLines(path string, seen map[string]int) (int, error) {
	b, err := os.ReadFile(path)
	if errors.Is(err, os.ErrNotExist) {
		return 0, nil
	}
	if err != nil {
		return 0, err
	}
	// A line still being written has no newline yet.
	if i := bytes.LastIndexByte(b, '\n'); i >= 0 {
		b = b[:i+1]
	} else {
		return 0, nil
	}
	n := 0
	sc := bufio.NewScanner(bytes.NewReader(b))
	for sc.Scan() {
		seen[sc.Text()]++
		n++
	}
	return n, sc.Err()
}

// callCounter is a reverse proxy in front of the emulator that counts
// calls by operation (the X-Amz-Target header).
type callCounter struct {
	*httptest.Server
	mu     sync.Mutex
	counts map[string]*atomic.Int64
	// errors counts requests the emulator did not answer (the proxy
	// answered 502): a sign it is saturated.
	errors atomic.Int64
}

func newCallCounter(target string) (*callCounter, error) {
	u, err := url.Parse(target)
	if err != nil {
		return nil, err
	}
	proxy := httputil.NewSingleHostReverseProxy(u)
	tr := http.DefaultTransport.(*http.Transport).Clone()
	tr.MaxIdleConns, tr.MaxIdleConnsPerHost = 1024, 1024
	proxy.Transport = tr
	cc := &callCounter{counts: map[string]*atomic.Int64{}}
	proxy.ErrorHandler = func(w http.ResponseWriter, _ *http.Request, _ error) {
		cc.errors.Add(1)
		w.WriteHeader(http.StatusBadGateway)
	}
	cc.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, op, _ := strings.Cut(r.Header.Get("X-Amz-Target"), ".")
		cc.counter(op).Add(1)
		proxy.ServeHTTP(w, r)
	}))
	return cc, nil
}

func (cc *callCounter) counter(op string) *atomic.Int64 {
	cc.mu.Lock()
	defer cc.mu.Unlock()
	c := cc.counts[op]
	if c == nil {
		c = &atomic.Int64{}
		cc.counts[op] = c
	}
	return c
}

func (cc *callCounter) snapshot() map[string]int64 {
	cc.mu.Lock()
	defer cc.mu.Unlock()
	out := make(map[string]int64, len(cc.counts))
	for op, c := range cc.counts {
		out[op] = c.Load()
	}
	out["(unanswered)"] = cc.errors.Load()
	return out
}
