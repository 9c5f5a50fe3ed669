package main

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"flag"
	"fmt"
	"maps"
	"math/big"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/kinesis"
	"github.com/aws/aws-sdk-go-v2/service/kinesis/types"
	"github.com/redis/go-redis/v9"

	"github.com/connect-kinesis/connect-kinesis/internal/kinesisx"
	"github.com/connect-kinesis/connect-kinesis/internal/testenv"
	"github.com/connect-kinesis/connect-kinesis/plugins/checkpointer"
)

func init() {
	parts["scale"] = part{
		summary: "thousands of shards over several input processes (the real binary) sharing one group: time to balance, idle cost, Redis per shard, a keyed load delivered in full",
		run:     runScale,
	}
}

type scaleFlags struct {
	shards, procs, perShard int
	bin, idlePoll           string
	settle, idle, timeout   time.Duration
	countCalls              bool
}

const (
	scaleStream = "bench-scale"
	scaleGroup  = "scale"
)

func runScale(ctx context.Context, args []string) error {
	var f scaleFlags
	fs := flag.NewFlagSet("scale", flag.ContinueOnError)
	fs.IntVar(&f.shards, "shards", 2000, "shards of the stream")
	fs.IntVar(&f.procs, "procs", 4, "input processes sharing the group")
	fs.IntVar(&f.perShard, "per-shard", 10, "records written to each shard by the keyed load")
	fs.StringVar(&f.bin, "bin", "", "connect-kinesis binary to run (default: build ./cmd/connect-kinesis into a temporary directory)")
	fs.DurationVar(&f.settle, "settle", 15*time.Second, "wait after balancing before the idle window")
	fs.DurationVar(&f.idle, "idle", time.Minute, "idle window over which CPU, Redis and Kinesis calls are measured")
	fs.DurationVar(&f.timeout, "timeout", 10*time.Minute, "longest wait for balancing, and for the keyed load's delivery")
	fs.StringVar(&f.idlePoll, "idle-poll-interval", "5s", "idle_poll_interval of the inputs; at the input's default (1s) 2,000 idle shards saturate kinesalite on a 2-core machine")
	fs.BoolVar(&f.countCalls, "count-calls", true, "put a counting proxy (in this process) between the inputs and kinesalite, to count their calls by operation")
	if err := fs.Parse(args); err != nil {
		return err
	}
	dir, err := os.MkdirTemp("", "bench-scale-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(dir)
	if f.bin == "" {
		fmt.Fprintln(os.Stderr, "bench scale: building connect-kinesis...")
		if f.bin, err = buildBinary(ctx, dir); err != nil {
			return err
		}
	}

	env, err := startEnv(ctx, envOptions{shardLimit: f.shards + 100, redis: true})
	if err != nil {
		return err
	}
	defer env.Close()
	emu, red := env.emu, env.red
	rc := red.Client()
	defer rc.Close()
	fmt.Fprintf(os.Stderr, "bench scale: creating a stream of %d shards...\n", f.shards)
	// The inputs key their checkpoints by the stream's ARN (kinesalite
	// makes one up), so the bench reads the same keys through it.
	streamID, err := emu.CreateStream(ctx, scaleStream, f.shards)
	if err != nil {
		return err
	}
	endpoint := emu.Endpoint
	var calls *callCounter
	if f.countCalls {
		calls, err = newCallCounter(emu.Endpoint)
		if err != nil {
			return err
		}
		defer calls.Close()
		endpoint = calls.URL
	}

	ckCfg := checkpointer.DefaultConfig()
	ckCfg.Group = scaleGroup
	store := checkpointer.NewFromClient(rc, ckCfg, nil, nil).Stream(streamID)

	// Start every process at once, as a deployment of a new group does.
	statsStart := commandStats(ctx, rc)
	start := time.Now()
	procs := make([]*scaleProc, f.procs)
	for i := range procs {
		if procs[i], err = startScaleProc(dir, f.bin, i, endpoint, red.URL(), f.idlePoll); err != nil {
			return err
		}
	}
	defer func() {
		var wg sync.WaitGroup
		for _, p := range procs {
			if p != nil {
				wg.Go(func() { p.stop(30 * time.Second) })
			}
		}
		wg.Wait()
	}()
	fmt.Fprintf(os.Stderr, "bench scale: %d processes started; waiting for every shard to be owned and balanced...\n", f.procs)
	bal, err := waitBalanced(ctx, rc, store, procs, f, start, statsStart)
	if err != nil {
		return err
	}
	statsBalanced := commandStats(ctx, rc)

	fmt.Fprintf(os.Stderr, "bench scale: balanced; settling %v, then measuring %v idle...\n", f.settle, f.idle)
	if err := sleepCtx(ctx, f.settle); err != nil {
		return err
	}
	if err := checkAlive(procs); err != nil {
		return err
	}
	idle, err := measureIdle(ctx, rc, emu, red, calls, procs, f.idle)
	if err != nil {
		return err
	}
	leases, err := store.Leases(ctx)
	if err != nil {
		return err
	}
	for _, p := range procs {
		p.shards = 0
	}
	for _, ls := range leases {
		if !ls.Expired {
			for _, p := range procs {
				if p.owner == ls.Owner {
					p.shards++
				}
			}
		}
	}

	fmt.Fprintf(os.Stderr, "bench scale: keyed load, %d records per shard...\n", f.perShard)
	load, err := keyedLoad(ctx, emu, procs, f)
	if err != nil {
		return err
	}

	printScale(f, bal, statsStart, statsBalanced, idle, procs, load)
	if load.unique != load.written {
		return fmt.Errorf("the keyed load was not delivered in full: %d of %d records", load.unique, load.written)
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

// scaleProc is one input process: kinesis (defaults) -> a file of lines.
type scaleProc struct {
	name, owner string
	out, log    string
	cmd         *exec.Cmd
	done        chan struct{}
	shards      int
}

// scaleYAML is an input process: every record's data becomes a line of
// its output file. The instance id is set so the bench can tell the
// processes' leases apart.
const scaleYAML = `
http: { enabled: false }
logger: { level: warn, format: logfmt }
input:
  kinesis:
    streams: [ %s ]
    region: %s
    endpoint: %s
    credentials: { id: %s, secret: %s }
    checkpoint:
      redis: { url: '%s' }
      group: %s
    lease: { instance_id: %s }%s
output:
  file:
    path: %s
    codec: lines
`

func startScaleProc(dir, bin string, i int, endpoint, redisURL, idlePoll string) (*scaleProc, error) {
	p := &scaleProc{
		name:  fmt.Sprintf("input-%d", i+1),
		owner: fmt.Sprintf("bench-scale-%d", i+1),
		out:   filepath.Join(dir, fmt.Sprintf("out-%d.txt", i+1)),
		log:   filepath.Join(dir, fmt.Sprintf("input-%d.log", i+1)),
		done:  make(chan struct{}),
	}
	conf := filepath.Join(dir, p.name+".yaml")
	extra := ""
	if idlePoll != "" {
		extra = "\n    idle_poll_interval: " + idlePoll
	}
	yaml := fmt.Sprintf(scaleYAML, scaleStream, testenv.Region, endpoint, testenv.AccessKey, testenv.SecretKey,
		redisURL, scaleGroup, p.owner, extra, p.out)
	if err := os.WriteFile(conf, []byte(yaml), 0o600); err != nil {
		return nil, err
	}
	logf, err := os.Create(p.log)
	if err != nil {
		return nil, err
	}
	defer logf.Close()
	p.cmd = exec.Command(bin, "-c", conf)
	p.cmd.Stdout, p.cmd.Stderr = logf, logf
	if err := p.cmd.Start(); err != nil {
		return nil, fmt.Errorf("starting %s: %w", bin, err)
	}
	go func() {
		_ = p.cmd.Wait()
		close(p.done)
	}()
	return p, nil
}

func (p *scaleProc) exited() bool {
	select {
	case <-p.done:
		return true
	default:
		return false
	}
}

// stop ends the process gracefully (it commits and releases), killing it
// after grace.
func (p *scaleProc) stop(grace time.Duration) {
	if p.exited() {
		return
	}
	_ = p.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-p.done:
	case <-time.After(grace):
		_ = p.cmd.Process.Kill()
		<-p.done
	}
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

// balance is when the group reached each state, since the processes
// started.
type balance struct {
	allOwned, balanced time.Duration
	counts             []int
	takes              int64 // the fencing tokens' sum: every acquisition adds one
	polls              int   // the bench's own Leases calls (one script call each)
	// Until every shard was first owned: the takes so far, the script
	// calls of the inputs and the bench's polls.
	takesOwned, scriptsOwned int64
	pollsOwned               int
}

// waitBalanced polls the leases until every shard has a live lease and
// every process holds its fair share (floor or ceil of shards / procs).
func waitBalanced(ctx context.Context, rc *redis.Client, store *checkpointer.Store, procs []*scaleProc, f scaleFlags, start time.Time, statsStart map[string]int64) (balance, error) {
	var b balance
	deadline := time.After(f.timeout)
	tick := time.NewTicker(250 * time.Millisecond)
	defer tick.Stop()
	lastReport := time.Now()
	for {
		select {
		case <-ctx.Done():
			return b, ctx.Err()
		case <-deadline:
			return b, fmt.Errorf("not balanced after %v: shards per process %v", f.timeout, b.counts)
		case <-tick.C:
		}
		if err := checkAlive(procs); err != nil {
			return b, err
		}
		leases, err := store.Leases(ctx)
		b.polls++
		if err != nil {
			return b, err
		}
		now := time.Since(start)
		byOwner := map[string]int{}
		owned := 0
		b.takes = 0
		for _, ls := range leases {
			b.takes += ls.Token
			if !ls.Expired {
				byOwner[ls.Owner]++
				owned++
			}
		}
		b.counts = b.counts[:0]
		for _, p := range procs {
			b.counts = append(b.counts, byOwner[p.owner])
		}
		if owned == f.shards && b.allOwned == 0 {
			b.allOwned = now
			st := commandStats(ctx, rc)
			b.takesOwned, b.pollsOwned = b.takes, b.polls
			b.scriptsOwned = st["evalsha"] - statsStart["evalsha"] + st["eval"] - statsStart["eval"]
		}
		floor := f.shards / f.procs
		ceil := (f.shards + f.procs - 1) / f.procs
		if owned == f.shards && slices.Min(b.counts) >= floor && slices.Max(b.counts) <= ceil {
			b.balanced = now
			return b, nil
		}
		if time.Since(lastReport) > 10*time.Second {
			fmt.Fprintf(os.Stderr, "bench scale: t=%v owned %d of %d, per process %v\n", now.Round(time.Second), owned, f.shards, b.counts)
			lastReport = time.Now()
		}
	}
}

// idleFigures is what the group cost over the idle window.
type idleFigures struct {
	window                  time.Duration
	procCPU                 []time.Duration
	procRSS                 []uint64
	kinesaliteCPU, redisCPU time.Duration
	benchCPU                time.Duration
	redisTotal              int64            // total_commands_processed, Lua-internal commands included
	stats                   map[string]int64 // per command, the bench's INFO calls left out
	calls                   map[string]int64 // Kinesis calls by operation, when counted
}

func measureIdle(ctx context.Context, rc *redis.Client, emu *testenv.Kinesis, red *testenv.Redis, calls *callCounter, procs []*scaleProc, window time.Duration) (idleFigures, error) {
	pids := []int{emu.Process().PID(), red.Process().PID()}
	for _, p := range procs {
		pids = append(pids, p.cmd.Process.Pid)
	}
	cpu := func() ([]time.Duration, error) {
		out := make([]time.Duration, len(pids))
		for i, pid := range pids {
			var err error
			if out[i], err = procCPU(pid); err != nil {
				return nil, err
			}
		}
		return out, nil
	}
	cpu0, err := cpu()
	if err != nil {
		return idleFigures{}, err
	}
	bench0 := cpuTime()
	total0, err := redisCommands(ctx, rc)
	if err != nil {
		return idleFigures{}, err
	}
	stats0 := commandStats(ctx, rc)
	var calls0 map[string]int64
	if calls != nil {
		calls0 = calls.snapshot()
	}
	start := time.Now()
	if err := sleepCtx(ctx, window); err != nil {
		return idleFigures{}, err
	}
	var calls1 map[string]int64
	if calls != nil {
		calls1 = calls.snapshot()
	}
	stats1 := commandStats(ctx, rc)
	total1, err := redisCommands(ctx, rc)
	if err != nil {
		return idleFigures{}, err
	}
	elapsed := time.Since(start)
	cpu1, err := cpu()
	if err != nil {
		return idleFigures{}, err
	}
	fig := idleFigures{
		window:        elapsed,
		kinesaliteCPU: cpu1[0] - cpu0[0],
		redisCPU:      cpu1[1] - cpu0[1],
		benchCPU:      cpuTime() - bench0,
		// The four INFO calls of the measurement count themselves.
		redisTotal: total1 - total0 - 3,
		stats:      map[string]int64{},
		calls:      map[string]int64{},
	}
	for name, n := range stats1 {
		if d := n - stats0[name]; d > 0 && name != "info" {
			fig.stats[name] = d
		}
	}
	for op, n := range calls1 {
		fig.calls[op] = n - calls0[op]
	}
	for i, p := range procs {
		fig.procCPU = append(fig.procCPU, cpu1[i+2]-cpu0[i+2])
		rss, err := procRSS(p.cmd.Process.Pid)
		if err != nil {
			return idleFigures{}, err
		}
		fig.procRSS = append(fig.procRSS, rss)
	}
	return fig, nil
}

// loadFigures is the keyed load's outcome.
type loadFigures struct {
	written, unique, duplicates int
	perProc                     []int
	put, delivered              time.Duration
}

// keyedLoad writes perShard records to every shard (an explicit hash key
// at each shard's start, a partition key per shard) and waits until the
// processes' output files hold every one of them.
func keyedLoad(ctx context.Context, emu *testenv.Kinesis, procs []*scaleProc, f scaleFlags) (loadFigures, error) {
	c := emu.Client()
	shards, err := kinesisx.ListAllShards(ctx, c, scaleStream)
	if err != nil {
		return loadFigures{}, err
	}
	var entries []types.PutRecordsRequestEntry
	for si, s := range shards {
		hash, ok := new(big.Int).SetString(aws.ToString(s.HashKeyRange.StartingHashKey), 10)
		if !ok {
			return loadFigures{}, fmt.Errorf("shard %s: malformed starting hash key", aws.ToString(s.ShardId))
		}
		for j := range f.perShard {
			entries = append(entries, types.PutRecordsRequestEntry{
				Data:            fmt.Appendf(nil, "r-%07d", len(entries)),
				PartitionKey:    aws.String(fmt.Sprintf("key-%d-%d", si, j)),
				ExplicitHashKey: aws.String(hash.String()),
			})
		}
	}
	start := time.Now()
	for len(entries) > 0 {
		n := min(len(entries), kinesisx.MaxPutRecordsCount)
		out, err := c.PutRecords(ctx, &kinesis.PutRecordsInput{StreamName: aws.String(scaleStream), Records: entries[:n]})
		if err != nil {
			return loadFigures{}, fmt.Errorf("writing the keyed load: %w", err)
		}
		if aws.ToInt32(out.FailedRecordCount) > 0 {
			return loadFigures{}, fmt.Errorf("writing the keyed load: %d records refused", aws.ToInt32(out.FailedRecordCount))
		}
		entries = entries[n:]
	}
	fig := loadFigures{written: len(shards) * f.perShard, put: time.Since(start)}
	deadline := time.Now().Add(f.timeout)
	for {
		seen := map[string]int{}
		fig.perProc = fig.perProc[:0]
		for _, p := range procs {
			n, err := countLines(p.out, seen)
			if err != nil {
				return fig, err
			}
			fig.perProc = append(fig.perProc, n)
		}
		fig.unique, fig.duplicates = len(seen), 0
		for _, n := range seen {
			fig.duplicates += n - 1
		}
		if fig.unique >= fig.written || time.Now().After(deadline) {
			fig.delivered = time.Since(start)
			return fig, nil
		}
		if err := checkAlive(procs); err != nil {
			return fig, err
		}
		if err := sleepCtx(ctx, 500*time.Millisecond); err != nil {
			return fig, err
		}
	}
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

func printScale(f scaleFlags, bal balance, statsStart, statsBalanced map[string]int64, idle idleFigures, procs []*scaleProc, load loadFigures) {
	settings := "input defaults"
	if f.idlePoll != "" {
		settings = "input defaults but idle_poll_interval " + f.idlePoll
	}
	fmt.Printf("scale: %d shards, %d input processes (connect-kinesis binary, %s) in one group on one Redis, kinesalite\n", f.shards, f.procs, settings)
	fmt.Println()
	fmt.Printf("every shard owned after            %v\n", bal.allOwned.Round(10*time.Millisecond))
	fmt.Printf("balanced (%d..%d each) after        %v   shards per process %v\n",
		f.shards/f.procs, (f.shards+f.procs-1)/f.procs, bal.balanced.Round(10*time.Millisecond), bal.counts)
	owning := bal.scriptsOwned - int64(bal.pollsOwned)
	fmt.Printf("Redis until every shard was owned   %d script calls for %d takes = %.2f per take (heartbeats, member and lease reads included)\n",
		owning, bal.takesOwned, float64(owning)/float64(bal.takesOwned))
	scripts := statsBalanced["evalsha"] - statsStart["evalsha"] + statsBalanced["eval"] - statsStart["eval"] - int64(bal.polls)
	fmt.Printf("Redis until balanced                %d script calls for %d takes (hand-offs: requests, releases, renewals included)\n",
		scripts, bal.takes)
	fmt.Println()
	perMin := time.Minute.Seconds() / idle.window.Seconds()
	fmt.Printf("idle, measured over %v after %v settling:\n", idle.window.Round(100*time.Millisecond), f.settle)
	fmt.Printf("%-14s %10s %10s %8s\n", "process", "CPU cores", "RSS MiB", "shards")
	for i, p := range procs {
		fmt.Printf("%-14s %10.3f %10.1f %8d\n", p.name, idle.procCPU[i].Seconds()/idle.window.Seconds(), mib(idle.procRSS[i]), p.shards)
	}
	fmt.Printf("%-14s %10.3f\n", "kinesalite", idle.kinesaliteCPU.Seconds()/idle.window.Seconds())
	fmt.Printf("%-14s %10.3f\n", "redis-server", idle.redisCPU.Seconds()/idle.window.Seconds())
	if len(idle.calls) > 0 {
		fmt.Printf("%-14s %10.3f   (the bench itself: the counting proxy)\n", "bench", idle.benchCPU.Seconds()/idle.window.Seconds())
	}
	fmt.Println()
	rt := idle.stats["evalsha"] + idle.stats["eval"]
	fmt.Printf("Redis, idle: %.0f round trips/min (script calls) = %.1f per shard per minute; %.0f commands/min with those run inside scripts = %.1f per shard per minute\n",
		float64(rt)*perMin, float64(rt)*perMin/float64(f.shards),
		float64(idle.redisTotal)*perMin, float64(idle.redisTotal)*perMin/float64(f.shards))
	var parts []string
	for _, name := range slices.Sorted(maps.Keys(idle.stats)) {
		parts = append(parts, fmt.Sprintf("%s %.0f", name, float64(idle.stats[name])*perMin))
	}
	fmt.Printf("  per minute by command: %s\n", strings.Join(parts, ", "))
	if len(idle.calls) > 0 {
		parts = parts[:0]
		for _, op := range slices.Sorted(maps.Keys(idle.calls)) {
			parts = append(parts, fmt.Sprintf("%s %.1f/s", op, float64(idle.calls[op])/idle.window.Seconds()))
		}
		get := float64(idle.calls["GetRecords"]) / idle.window.Seconds()
		fmt.Printf("Kinesis calls, idle: %s (GetRecords %.2f per shard per second)\n", strings.Join(parts, ", "), get/float64(f.shards))
	}
	fmt.Println()
	verdict := "delivered in full"
	if load.unique != load.written {
		verdict = "NOT delivered in full"
	}
	fmt.Printf("keyed load: %d records (%d per shard, explicit hash keys) written in %v; %d unique read back across the processes %v after the first write (%d duplicates; per process %v): %s\n",
		load.written, f.perShard, load.put.Round(10*time.Millisecond), load.unique, load.delivered.Round(100*time.Millisecond), load.duplicates, load.perProc, verdict)
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
