// Package chaos runs the reliability suite of issue 6: a producer process
// writes keyed, counted records through the `kinesis` output and a fault
// proxy; three consumer processes read them through the proxy with Redis
// checkpoints; a schedule kills instances, reshards the stream and disturbs
// Redis during the load; a checker then compares what was sent, what the
// stream holds and what was delivered (see Check and Table).
//
// Every process is the real connect-kinesis binary with a YAML config, so the
// suite tests what users run. The emulator is kinesis-mock (it reshards and
// lists child shards); the proxy is faultproxy.Front.
package chaos

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math/big"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/kinesis"
	"github.com/aws/aws-sdk-go-v2/service/kinesis/types"
	"github.com/redis/go-redis/v9"

	"github.com/connect-kinesis/connect-kinesis/internal/consumer"
	"github.com/connect-kinesis/connect-kinesis/internal/faultproxy"
	"github.com/connect-kinesis/connect-kinesis/internal/kinesisx"
	"github.com/connect-kinesis/connect-kinesis/internal/producer/producertest"
	"github.com/connect-kinesis/connect-kinesis/internal/testenv"
	"github.com/connect-kinesis/connect-kinesis/plugins/checkpointer"
)

// Config of one run.
type Config struct {
	// Binary is the connect-kinesis binary to run.
	Binary string
	// Dir receives the configs, logs and delivery files.
	Dir string
	// Seed drives the schedule's choices and the proxy's faults.
	Seed uint64
	// Short is the form run inside `make test`: less load, the same events.
	Short bool
	// EmptyRedis is the phase where Redis runs without persistence, so its
	// restart brings it back empty, while the instances read with
	// `start_position: latest`: they must notice, re-seed what they know and
	// lose nothing written after the group started.
	EmptyRedis bool
	// Logf reports progress; nil is quiet.
	Logf func(format string, args ...any)
	// EFO makes the consumer instances read with enhanced fan-out, over
	// kinesis-mock's TLS port (HTTP/2). The fault proxy speaks HTTP/1.1, so
	// their reads bypass its faults; instead a TCP proxy in front of the
	// TLS port cuts every connection (every live subscription) between the
	// kills. Writes still go through the fault proxy.
	EFO bool
}

// Plan is the shape of a run: load, timings and when each event happens
// (offsets from the start of the load).
type Plan struct {
	Shards        int
	Keys          int
	BatchInterval time.Duration // the load: one record per key per interval
	Load          time.Duration
	Drain         time.Duration // the most time the consumers get to catch up afterwards

	LeasePeriod, Rebalance, CommitPeriod time.Duration

	KillEvery, RestartAfter time.Duration
	Splits                  []time.Duration
	Merge                   time.Duration
	RedisRestart            time.Duration
	RedisPause              time.Duration
	PauseFor                time.Duration
}

// PlanFor returns the short or the full plan.
func PlanFor(short bool) Plan {
	p := Plan{
		LeasePeriod:  3 * time.Second,
		Rebalance:    time.Second,
		CommitPeriod: 500 * time.Millisecond,
		RestartAfter: time.Second,
	}
	if short {
		p.Shards, p.Keys, p.BatchInterval, p.Load, p.Drain = 3, 15, 100*time.Millisecond, 32*time.Second, 90*time.Second
		p.KillEvery = 6 * time.Second
		p.Splits = []time.Duration{7 * time.Second, 13 * time.Second}
		p.Merge = 22 * time.Second
		p.RedisRestart = 17 * time.Second
		p.RedisPause = 26 * time.Second
	} else {
		p.Shards, p.Keys, p.BatchInterval, p.Load, p.Drain = 4, 20, 100*time.Millisecond, 90*time.Second, 180*time.Second
		p.KillEvery = 5 * time.Second
		p.Splits = []time.Duration{15 * time.Second, 30 * time.Second}
		p.Merge = 50 * time.Second
		p.RedisRestart = 40 * time.Second
		p.RedisPause = 70 * time.Second
	}
	p.PauseFor = p.LeasePeriod + 2*time.Second
	return p
}

// Faults are what the proxy does throughout the load: 10% throttling, 1%
// 5xx and some connection resets on every call, refused PutRecords entries,
// expired iterators, answers cut mid-body, and the per-shard limits.
func Faults(f *faultproxy.Front) {
	f.Set(faultproxy.AllOperations, faultproxy.Rule{ThrottleRate: 0.10, ErrorRate: 0.01, CutRate: 0.005})
	f.Set("PutRecords", faultproxy.Rule{ThrottleRate: 0.10, ErrorRate: 0.01, CutRate: 0.005, CutAfterRate: 0.005, EntryFailRate: 0.05})
	f.SetReadFaults(faultproxy.ReadFaults{ExpiredIteratorRate: 0.01, ResetRate: 0.01})
	f.SetLimits(faultproxy.Limits{Reads: true, Writes: true})
}

const (
	streamName = "chaos"
	group      = "chaos"
)

// runner holds one run's state.
type runner struct {
	cfg  Config
	plan Plan
	logf func(string, ...any)
	rng  *rand.Rand

	kin   *testenv.Kinesis
	red   *testenv.Redis
	front *faultproxy.Front
	// cutter stands in front of kinesis-mock's TLS port with EFO; cuts
	// counts the connections it cut.
	cutter *testenv.TCPProxy
	cuts   atomic.Int64
	kc     *kinesis.Client
	store  *checkpointer.Store
	rc     *redis.Client

	mu        sync.Mutex
	instances map[string]*incarnation // live incarnation per instance name
	outputs   []string
	windows   []Window
	kills     []Kill
	counter   map[string]int
}

type incarnation struct {
	name string // e.g. "b3": instance b, third start
	cmd  *exec.Cmd
	done chan struct{}
}

// Run performs one chaos run and returns the checker's table. An error means
// the run itself could not be carried out (not that it found a fault).
func Run(ctx context.Context, cfg Config) (Table, error) {
	r := &runner{
		cfg:       cfg,
		plan:      PlanFor(cfg.Short),
		logf:      cfg.Logf,
		rng:       rand.New(rand.NewPCG(cfg.Seed, cfg.Seed+1)),
		instances: map[string]*incarnation{},
		counter:   map[string]int{},
	}
	if r.logf == nil {
		r.logf = func(string, ...any) {}
	}
	defer r.cleanup()
	if err := r.setUp(ctx); err != nil {
		return Table{}, err
	}
	return r.run(ctx)
}

func (r *runner) setUp(ctx context.Context) error {
	var err error
	if r.kin, err = testenv.StartKinesisMock(ctx); err != nil {
		return fmt.Errorf("starting kinesis-mock: %w", err)
	}
	if r.red, err = testenv.StartRedis(ctx, testenv.RedisOptions{AppendOnly: !r.cfg.EmptyRedis}); err != nil {
		return fmt.Errorf("starting redis-server: %w", err)
	}
	r.kc = r.kin.Client()
	arn, err := r.kin.CreateStream(ctx, streamName, r.plan.Shards)
	if err != nil {
		return fmt.Errorf("creating stream %s: %w", streamName, err)
	}
	if r.front, err = faultproxy.StartFront(r.kin.Endpoint, "127.0.0.1:0", r.cfg.Seed); err != nil {
		return err
	}
	if r.cfg.EFO {
		if r.cutter, err = testenv.StartTCPProxy(strings.TrimPrefix(r.kin.TLSEndpoint, "https://")); err != nil {
			return err
		}
	}
	r.rc = r.red.Client()
	ck := checkpointer.DefaultConfig()
	ck.Group = group
	ck.LeasePeriod = r.plan.LeasePeriod
	r.store = checkpointer.NewFromClient(r.rc, ck, nil, nil).Stream(arn)
	return nil
}

func (r *runner) cleanup() {
	r.mu.Lock()
	insts := make([]*incarnation, 0, len(r.instances))
	for _, in := range r.instances {
		insts = append(insts, in)
	}
	r.mu.Unlock()
	for _, in := range insts {
		_ = in.cmd.Process.Kill()
		<-in.done
	}
	if r.cutter != nil {
		r.cutter.Close()
	}
	if r.front != nil {
		_ = r.front.Close()
	}
	if r.rc != nil {
		_ = r.rc.Close()
	}
	if r.red != nil {
		_ = r.red.Resume() // never leave a stopped process behind
		r.red.Close()
	}
	if r.kin != nil {
		r.kin.Close()
	}
}

func (r *runner) run(ctx context.Context) (Table, error) {
	p := r.plan
	for _, name := range []string{"a", "b", "c"} {
		if err := r.start(name); err != nil {
			return Table{}, err
		}
	}
	if r.cfg.EmptyRedis {
		// With `latest`, what is written before the group starts is not
		// the group's to read: produce once every shard is leased.
		if err := r.waitLeased(ctx); err != nil {
			return Table{}, err
		}
	}
	Faults(r.front)
	r.logf("chaos: %d shards, %d keys, %v of load at %d records/s; faults on", p.Shards, p.Keys, p.Load, int(float64(p.Keys)/p.BatchInterval.Seconds()))

	batches := int(p.Load / p.BatchInterval)
	producer, err := r.startProducer(batches)
	if err != nil {
		return Table{}, err
	}
	loadStart := time.Now()
	// On an early return the schedule stops before the processes and
	// servers it acts on are torn down.
	schedCtx, cancelSched := context.WithCancel(ctx)
	schedErr := make(chan error, 1)
	var schedDone sync.WaitGroup
	schedDone.Add(1)
	go func() { defer schedDone.Done(); schedErr <- r.schedule(schedCtx, loadStart) }()
	defer func() { cancelSched(); schedDone.Wait() }()

	prodDone := make(chan error, 1)
	go func() { prodDone <- producer.Wait() }()
	select {
	case err := <-prodDone:
		if err != nil {
			return Table{}, fmt.Errorf("the producer process failed (see %s): %w", filepath.Join(r.cfg.Dir, "producer.log"), err)
		}
	case <-time.After(producerDeadline(p)):
		_ = producer.Process.Kill()
		return Table{}, fmt.Errorf("the producer did not finish %d batches within %v (see producer.log)", batches, producerDeadline(p))
	case <-ctx.Done():
		_ = producer.Process.Kill()
		return Table{}, ctx.Err()
	}
	if err := <-schedErr; err != nil {
		return Table{}, err
	}
	r.logf("chaos: load done after %v; waiting for the consumers to catch up", time.Since(loadStart).Round(time.Second))
	for k := range p.Keys {
		r.counter["k"+strconv.Itoa(k)] = batches
	}

	// Every instance up, then wait until each stream record is delivered.
	for _, name := range []string{"a", "b", "c"} {
		if err := r.ensureRunning(name); err != nil {
			return Table{}, err
		}
	}
	stream, err := r.readStream(ctx)
	if err != nil {
		return Table{}, err
	}
	deadline := time.Now().Add(p.Drain)
	for {
		ds, err := ReadDeliveries(r.outputFiles()...)
		if err != nil {
			return Table{}, err
		}
		if uniqueIDs(ds) >= len(stream) || time.Now().After(deadline) {
			break
		}
		select {
		case <-time.After(time.Second):
		case <-ctx.Done():
			return Table{}, ctx.Err()
		}
	}
	r.stopAll()
	ds, err := ReadDeliveries(r.outputFiles()...)
	if err != nil {
		return Table{}, err
	}
	t := Check(r.counter, stream, ds, r.windows, r.kills)
	t.Injected = r.injected()
	t.EFO = r.cutter != nil
	return t, nil
}

// injected sums up what the proxy did, so the table shows the faults fired.
func (r *runner) injected() string {
	var throttled, failed, cut, cutAfter, refused int
	for _, op := range []string{"PutRecords", "GetRecords", "GetShardIterator", "ListShards", "DescribeStreamSummary", "DescribeStream"} {
		st := r.front.Stats(op)
		throttled += st.Throttled
		failed += st.Errors
		cut += st.Cut
		cutAfter += st.CutAfter
		refused += st.EntriesRefused
	}
	fs := r.front.FrontStats()
	// Calls the shard limits throttled never reach the Proxy's counts.
	reads := r.front.Stats("GetRecords").Requests + fs.ReadsThrottled
	s := fmt.Sprintf("%d throttled, %d 5xx, %d cut, %d cut after write, %d entries refused, %d expired iterators, %d answers cut mid-body, %d of %d GetRecords and %d records over shard limits",
		throttled, failed, cut, cutAfter, refused, fs.ExpiredIterators, fs.ResetsMidAnswer, fs.ReadsThrottled, reads, fs.RecordsThrottled)
	if r.cutter != nil {
		s += fmt.Sprintf("; enhanced fan-out: %d connections cut under live subscriptions", r.cuts.Load())
	}
	return s
}

// killWindow is how far before a SIGKILL a first delivery may be and still
// be delivered again: twice the commit period plus a lease period of slack.
func killWindow(p Plan) time.Duration { return 2*p.CommitPeriod + p.LeasePeriod }

// producerDeadline is how long the producer may take: the faults and a busy
// machine (kinesis-mock slows down as shards fill) stretch the nominal load.
func producerDeadline(p Plan) time.Duration { return 4*p.Load + p.Drain }

func uniqueIDs(ds []Delivery) int {
	seen := make(map[[2]string]bool, len(ds))
	for _, d := range ds {
		seen[[2]string{d.Shard, d.Seq}] = true
	}
	return len(seen)
}

// schedule runs the events of the plan at their offsets from start.
func (r *runner) schedule(ctx context.Context, start time.Time) error {
	p := r.plan
	type event struct {
		at   time.Duration
		name string
		do   func(context.Context) error
	}
	var evs []event
	for at := p.KillEvery; at < p.Load-p.KillEvery/2; at += p.KillEvery {
		// A dead instance cannot re-seed what it held: its shards would be
		// read again from the group's start (duplicates beyond the bound,
		// never a loss). Kills stay clear of an empty restart.
		if r.cfg.EmptyRedis && (at-p.RedisRestart).Abs() < p.LeasePeriod+p.RestartAfter+2*time.Second {
			continue
		}
		evs = append(evs, event{at, "kill", r.killRandom})
	}
	for _, at := range p.Splits {
		evs = append(evs, event{at, "split", r.split})
	}
	if r.cutter != nil {
		for at := p.KillEvery / 2; at < p.Load; at += p.KillEvery {
			evs = append(evs, event{at, "cut subscriptions", func(context.Context) error {
				r.cuts.Add(int64(r.cutter.Cut()))
				return nil
			}})
		}
	}
	evs = append(evs,
		event{p.Merge, "merge", r.merge},
		event{p.RedisRestart, r.restartName(), r.restartRedis},
		event{p.RedisPause, "redis pause", r.pauseRedis},
	)
	sort.SliceStable(evs, func(i, j int) bool { return evs[i].at < evs[j].at })
	var wg sync.WaitGroup
	errs := make(chan error, len(evs))
	for _, ev := range evs {
		select {
		case <-time.After(time.Until(start.Add(ev.at))):
		case <-ctx.Done():
			wg.Wait()
			return ctx.Err()
		}
		r.logf("chaos: t=%v %s", ev.at, ev.name)
		// Events run concurrently: a kill does not wait for a Redis pause.
		wg.Add(1)
		go func() {
			defer wg.Done()
			if err := ev.do(ctx); err != nil {
				errs <- fmt.Errorf("%s at t=%v: %w", ev.name, ev.at, err)
			}
		}()
	}
	wg.Wait()
	close(errs)
	return <-errs
}

// instanceYAML is a consumer instance: every record becomes a line with its
// key, counter, shard, sequence number, incarnation and time.
const instanceYAML = `
http: { enabled: false }
logger: { level: info, format: logfmt }
input:
  kinesis:
    streams: [ %s ]
    start_position: %s
    region: %s
    endpoint: %s
    credentials: { id: %s, secret: %s }
    checkpoint:
      redis: { url: '%s' }
      group: %s
      commit_period: %s
    lease: { period: %s, rebalance_period: %s, handoff_timeout: 5s }
    shard_max_in_flight: 1
    shard_discovery_interval: 1s
    idle_poll_interval: 300ms
%spipeline:
  processors:
    - mapping: |
        root.k = this.k
        root.c = this.c
        root.shard = @kinesis_shard
        root.seq = @kinesis_sequence_number
        root.inst = "%s"
        root.at = now()
output:
  file: { path: %s, codec: lines }
shutdown_timeout: 15s
`

// start launches a new incarnation of instance name.
func (r *runner) start(name string) error {
	r.mu.Lock()
	n := 1
	for _, o := range r.outputs {
		if strings.HasPrefix(filepath.Base(o), name) {
			n++
		}
	}
	inc := name + strconv.Itoa(n)
	out := filepath.Join(r.cfg.Dir, inc+".jsonl")
	r.outputs = append(r.outputs, out)
	r.mu.Unlock()

	p := r.plan
	conf := filepath.Join(r.cfg.Dir, inc+".yaml")
	startPosition := "trim_horizon"
	if r.cfg.EmptyRedis {
		startPosition = "latest"
	}
	endpoint, efo := r.front.URL, ""
	if r.cutter != nil {
		endpoint, efo = "https://"+r.cutter.Addr, "    enhanced_fan_out: { enabled: true }\n"
	}
	if err := os.WriteFile(conf, []byte(fmt.Sprintf(instanceYAML, streamName, startPosition, testenv.Region, endpoint,
		testenv.AccessKey, testenv.SecretKey, r.red.URL(), group, p.CommitPeriod, p.LeasePeriod, p.Rebalance, efo, inc, out)), 0o600); err != nil {
		return err
	}
	cmd, err := r.launch(conf, filepath.Join(r.cfg.Dir, inc+".log"))
	if err != nil {
		return err
	}
	in := &incarnation{name: inc, cmd: cmd, done: make(chan struct{})}
	go func() { _ = cmd.Wait(); close(in.done) }()
	r.mu.Lock()
	r.instances[name] = in
	r.mu.Unlock()
	return nil
}

func (r *runner) launch(conf, logPath string) (*exec.Cmd, error) {
	logf, err := os.Create(logPath)
	if err != nil {
		return nil, err
	}
	cmd := exec.Command(r.cfg.Binary, "-c", conf)
	cmd.Stdout, cmd.Stderr = logf, logf
	if r.cutter != nil {
		// Trust kinesis-mock's test CA; read its subscriptions without the
		// initial-response event it omits.
		cmd.Env = append(os.Environ(), "AWS_CA_BUNDLE="+r.kin.CAFile, consumer.EnvEmulatorNoInitialResponse+"=true")
	}
	if err := cmd.Start(); err != nil {
		logf.Close()
		return nil, fmt.Errorf("starting %s: %w", r.cfg.Binary, err)
	}
	// The child has its own descriptor; ours is not needed.
	logf.Close()
	return cmd, nil
}

func (r *runner) ensureRunning(name string) error {
	r.mu.Lock()
	in := r.instances[name]
	r.mu.Unlock()
	if in != nil {
		select {
		case <-in.done:
		default:
			return nil
		}
	}
	return r.start(name)
}

func (r *runner) outputFiles() []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]string(nil), r.outputs...)
}

// stopAll stops every instance gracefully (SIGTERM: commit and release).
func (r *runner) stopAll() {
	r.mu.Lock()
	insts := r.instances
	r.instances = map[string]*incarnation{}
	r.mu.Unlock()
	for _, in := range insts {
		_ = in.cmd.Process.Signal(syscall.SIGTERM)
	}
	for _, in := range insts {
		select {
		case <-in.done:
		case <-time.After(30 * time.Second):
			_ = in.cmd.Process.Kill()
			<-in.done
		}
	}
}

// killRandom SIGKILLs one live instance and restarts it RestartAfter later.
func (r *runner) killRandom(ctx context.Context) error {
	names := []string{"a", "b", "c"}
	r.mu.Lock()
	name := names[r.rng.IntN(len(names))]
	in := r.instances[name]
	r.mu.Unlock()
	if in == nil {
		return nil
	}
	select {
	case <-in.done:
		return nil // already dead and about to be restarted
	default:
	}
	// The shards it owns, for the failover gap; Redis may be paused, so do
	// not wait for it long.
	var owned []string
	lctx, cancel := context.WithTimeout(ctx, 500*time.Millisecond)
	leases, err := r.store.Leases(lctx)
	cancel()
	if err == nil {
		pid := "-" + strconv.Itoa(in.cmd.Process.Pid) + "-"
		for shard, l := range leases {
			if !l.Expired && strings.Contains(l.Owner, pid) {
				owned = append(owned, shard)
			}
		}
	}
	now := time.Now()
	_ = in.cmd.Process.Signal(syscall.SIGKILL)
	<-in.done
	r.mu.Lock()
	r.kills = append(r.kills, Kill{Inst: in.name, At: now, Shards: owned})
	// What it delivered since its last commit (a commit period, plus a
	// batch in flight and a commit round trip) is delivered again. The slack
	// covers commits delayed by a starved CPU or a Redis outage.
	r.windows = append(r.windows, Window{What: "kill " + in.name, Inst: in.name, From: now.Add(-killWindow(r.plan)), To: now})
	r.mu.Unlock()
	r.logf("chaos: killed %s (owned %v)", in.name, owned)
	select {
	case <-time.After(r.plan.RestartAfter):
	case <-ctx.Done():
		return ctx.Err()
	}
	return r.start(name)
}

func (r *runner) restartName() string {
	if r.cfg.EmptyRedis {
		return "redis restart, empty"
	}
	return "redis restart"
}

// waitLeased waits until every open shard has a live lease.
func (r *runner) waitLeased(ctx context.Context) error {
	deadline := time.Now().Add(60 * time.Second)
	for {
		leases, err := r.store.Leases(ctx)
		live := 0
		for _, l := range leases {
			if !l.Expired {
				live++
			}
		}
		if err == nil && live >= r.plan.Shards {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("the instances did not lease all %d shards within a minute (%d live leases, %v); see the instances' logs in %s", r.plan.Shards, live, err, r.cfg.Dir)
		}
		select {
		case <-time.After(200 * time.Millisecond):
		case <-ctx.Done():
			return ctx.Err()
		}
	}
}

func (r *runner) restartRedis(ctx context.Context) error {
	now := time.Now()
	if err := r.red.Restart(ctx); err != nil {
		return err
	}
	// A commit in flight when Redis stopped may be lost with the connection
	// (the AOF keeps every acknowledged write). Without the AOF, the
	// instances re-seed the positions they acked.
	r.mu.Lock()
	r.windows = append(r.windows, Window{What: "redis restart", From: now.Add(-2 * r.plan.CommitPeriod), To: time.Now().Add(r.plan.LeasePeriod)})
	r.mu.Unlock()
	return nil
}

func (r *runner) pauseRedis(ctx context.Context) error {
	from := time.Now()
	if err := r.red.Pause(); err != nil {
		return err
	}
	select {
	case <-time.After(r.plan.PauseFor):
	case <-ctx.Done():
	}
	if err := r.red.Resume(); err != nil {
		return err
	}
	// Leases expire during the pause: what was delivered but not committed
	// from the last commit before it until the readers stop is read again.
	r.mu.Lock()
	r.windows = append(r.windows, Window{What: "redis pause", From: from.Add(-2 * r.plan.CommitPeriod), To: time.Now().Add(r.plan.LeasePeriod)})
	r.mu.Unlock()
	return nil
}

// openShards lists the stream's open shards from the emulator, sorted by
// their hash key ranges.
func (r *runner) openShards(ctx context.Context) ([]types.Shard, error) {
	all, err := kinesisx.ListAllShards(ctx, r.kc, streamName)
	if err != nil {
		return nil, err
	}
	var shards []types.Shard
	for _, s := range all {
		if s.SequenceNumberRange.EndingSequenceNumber == nil {
			shards = append(shards, s)
		}
	}
	sort.Slice(shards, func(i, j int) bool {
		return bigOf(shards[i].HashKeyRange.StartingHashKey).Cmp(bigOf(shards[j].HashKeyRange.StartingHashKey)) < 0
	})
	return shards, nil
}

func bigOf(s *string) *big.Int {
	b, _ := new(big.Int).SetString(aws.ToString(s), 10)
	return b
}

// split splits the widest open shard in two.
func (r *runner) split(ctx context.Context) error {
	shards, err := r.openShards(ctx)
	if err != nil {
		return err
	}
	var widest types.Shard
	var width *big.Int
	for _, s := range shards {
		w := new(big.Int).Sub(bigOf(s.HashKeyRange.EndingHashKey), bigOf(s.HashKeyRange.StartingHashKey))
		if width == nil || w.Cmp(width) > 0 {
			widest, width = s, w
		}
	}
	mid := new(big.Int).Add(bigOf(widest.HashKeyRange.StartingHashKey), new(big.Int).Rsh(width, 1))
	if _, err := r.kc.SplitShard(ctx, &kinesis.SplitShardInput{
		StreamName: aws.String(streamName), ShardToSplit: widest.ShardId, NewStartingHashKey: aws.String(mid.String()),
	}); err != nil {
		return fmt.Errorf("splitting shard %s: %w", aws.ToString(widest.ShardId), err)
	}
	r.logf("chaos: split %s", aws.ToString(widest.ShardId))
	_, err = r.kin.WaitActive(ctx, streamName)
	return err
}

// merge merges the first two adjacent open shards.
func (r *runner) merge(ctx context.Context) error {
	shards, err := r.openShards(ctx)
	if err != nil {
		return err
	}
	for i := 0; i+1 < len(shards); i++ {
		end := bigOf(shards[i].HashKeyRange.EndingHashKey)
		if new(big.Int).Add(end, big.NewInt(1)).Cmp(bigOf(shards[i+1].HashKeyRange.StartingHashKey)) != 0 {
			continue
		}
		if _, err := r.kc.MergeShards(ctx, &kinesis.MergeShardsInput{
			StreamName: aws.String(streamName), ShardToMerge: shards[i].ShardId, AdjacentShardToMerge: shards[i+1].ShardId,
		}); err != nil {
			return fmt.Errorf("merging shards %s and %s: %w", aws.ToString(shards[i].ShardId), aws.ToString(shards[i+1].ShardId), err)
		}
		r.logf("chaos: merged %s and %s", aws.ToString(shards[i].ShardId), aws.ToString(shards[i+1].ShardId))
		_, err = r.kin.WaitActive(ctx, streamName)
		return err
	}
	return errors.New("no two adjacent open shards to merge")
}

// producerYAML writes batches holding recordsPerKeyPerBatch records of each
// key, k0..kN, each with the key's counter, through the output and the
// proxy. The output runs with its default per-key ordering and
// max_in_flight above 1, and retries without bound, so a key's records must
// land in counter order and none is given up: the checker reads the stream
// back in order (OutputOrderViolations).
const producerYAML = `
http: { enabled: false }
logger: { level: info, format: logfmt }
input:
  generate:
    count: %d
    batch_size: %d
    interval: %s
    mapping: |
      let n = counter() - 1
      root.k = "k" + ($n %% %d).string()
      root.c = ($n / %d).floor().int64() + 1
output:
  kinesis:
    stream: %s
    partition_key: '${! this.k }'
    region: %s
    endpoint: %s
    credentials: { id: %s, secret: %s }
    max_in_flight: 8
    max_retries: 0
    backoff: { initial_interval: 50ms, max_interval: 1s, max_elapsed_time: 0s }
`

// recordsPerKeyPerBatch is how many records of each key one producer batch
// holds, so that the output's per-key order is tested within a batch too.
const recordsPerKeyPerBatch = 4

func (r *runner) startProducer(batches int) (*exec.Cmd, error) {
	p := r.plan
	conf := filepath.Join(r.cfg.Dir, "producer.yaml")
	// The same records per second as one record per key per BatchInterval.
	if err := os.WriteFile(conf, []byte(fmt.Sprintf(producerYAML, batches*p.Keys, recordsPerKeyPerBatch*p.Keys, recordsPerKeyPerBatch*p.BatchInterval, p.Keys, p.Keys,
		streamName, testenv.Region, r.front.URL, testenv.AccessKey, testenv.SecretKey)), 0o600); err != nil {
		return nil, err
	}
	return r.launch(conf, filepath.Join(r.cfg.Dir, "producer.log"))
}

// readStream reads every record of every shard, open or closed, straight
// from the emulator: parents before children, each shard in sequence order,
// so each key's records come in the order a reader following lineage sees.
func (r *runner) readStream(ctx context.Context) ([]Record, error) {
	shards, err := kinesisx.ListAllShards(ctx, r.kc, streamName)
	if err != nil {
		return nil, err
	}
	shards = producertest.LineageOrder(shards)
	var all []Record
	for _, s := range shards {
		it, err := r.kc.GetShardIterator(ctx, &kinesis.GetShardIteratorInput{
			StreamName: aws.String(streamName), ShardId: s.ShardId, ShardIteratorType: types.ShardIteratorTypeTrimHorizon,
		})
		if err != nil {
			return nil, fmt.Errorf("reading shard %s: %w", aws.ToString(s.ShardId), err)
		}
		iter := it.ShardIterator
		for iter != nil {
			out, err := r.kc.GetRecords(ctx, &kinesis.GetRecordsInput{ShardIterator: iter})
			if err != nil {
				return nil, fmt.Errorf("reading shard %s: %w", aws.ToString(s.ShardId), err)
			}
			for _, rec := range out.Records {
				var d Delivery
				if err := json.Unmarshal(rec.Data, &d); err != nil {
					return nil, fmt.Errorf("record %s of shard %s is not a chaos record: %w", aws.ToString(rec.SequenceNumber), aws.ToString(s.ShardId), err)
				}
				all = append(all, Record{Shard: aws.ToString(s.ShardId), Seq: aws.ToString(rec.SequenceNumber), K: d.K, C: d.C})
			}
			if len(out.Records) == 0 && aws.ToInt64(out.MillisBehindLatest) == 0 {
				break
			}
			iter = out.NextShardIterator
		}
	}
	return all, nil
}
