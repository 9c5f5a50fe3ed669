package chaos

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	awshttp "github.com/aws/aws-sdk-go-v2/aws/transport/http"
	"github.com/aws/aws-sdk-go-v2/service/kinesis"
	"github.com/aws/smithy-go"
	"github.com/redis/go-redis/v9"

	"github.com/connect-kinesis/connect-kinesis/internal/faultproxy"
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
	// RedisStalls replaces the one long Redis pause with three short ones
	// (SIGSTOP for stallFor, stallGap apart): a stall is no lost lease, so
	// readers go on after it without reading anything again.
	RedisStalls bool
	// Logf reports progress; nil is quiet.
	Logf func(format string, args ...any)
	// EFO makes the consumer instances read with enhanced fan-out, over
	// kinesis-mock's TLS port (HTTP/2). The fault proxy speaks HTTP/1.1, so
	// their reads bypass its faults; instead a TCP proxy in front of the
	// TLS port cuts every connection (every live subscription) between the
	// kills. Writes still go through the fault proxy.
	EFO bool
	// Started, if set, is given the PID of every process the run starts
	// (the instances' incarnations and the producer) as it starts, so a
	// caller can check that none outlives Run.
	Started func(pid int)
	// ShardParallelism, above 1, makes the consumer instances read each
	// shard in that many lanes by partition key; the verdict's per-key
	// order check is what they must keep.
	ShardParallelism int
	// Standbys runs one instance more than the stream ever has open
	// shards, instead of three, so some instance always holds none and
	// waits as a standby. With EmptyRedis a standby meets the store that
	// came back empty: it must take nothing from it before the holders
	// re-seeded what they know.
	Standbys bool
	// PausedHolder, with EmptyRedis, freezes the instance holding the most
	// shards while Redis restarts empty and starts a newcomer the moment
	// it is back (paused_holder.go).
	PausedHolder bool
	// ClosesParent, with PausedHolder, splits a shard the paused holder
	// holds before Redis goes down, and wakes the holder only once another
	// instance closed that parent (paused_holder.go).
	ClosesParent bool
	// OutputDown makes the instances write through an HTTP sink that
	// answers 503 for this long from outputDownAt into the load
	// (outage.go).
	OutputDown time.Duration
	// MaxBufferedBytes, if set, is the instances' max_buffered_bytes: a
	// budget small enough that shards take turns to fetch.
	MaxBufferedBytes string
	// SplitBatching makes the producer's output batch through a policy
	// with a splitting processor, among records that fail validation
	// (over max_record_size) in the same keys (see splitBatchingYAML).
	SplitBatching bool
	// DeniedShard adds a second stream of one shard to the instances'
	// streams, whose every GetShardIterator the proxy answers with
	// AccessDeniedException (faultproxy.DenyStream) all along: that
	// shard's reads keep failing while the others must be read.
	DeniedShard bool
}

const (
	streamName   = "chaos"
	group        = "chaos"
	deniedStream = "chaos-denied"
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
	// stalledFor is how long the emulator stalled so far, as the soak's
	// probe saw it (nil without one); patience replaces emulatorPatience
	// when set (tests).
	stalledFor func() time.Duration
	patience   time.Duration
	kc         *kinesis.Client
	store      *checkpointer.Store
	rc         redis.UniversalClient

	mu        sync.Mutex
	instances map[string]*incarnation // live incarnation per instance name
	children  []*child                // every process started, live or not
	outputs   []string
	windows   []Window
	kills     []Kill
	counter   map[string]int
	standbys  int // with Standbys: instances without a lease as Redis went down
	// scenario is the evidence that the phase's own case happened, for
	// the table (ClosesParent, OutputDown).
	scenario string
	sink     *outageSink // with OutputDown
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

// setUp starts the emulator, Redis and the proxies and creates the stream.
func (r *runner) setUp(ctx context.Context) error {
	var err error
	if r.kin, err = testenv.StartKinesisMock(ctx); err != nil {
		return fmt.Errorf("starting kinesis-mock: %w", err)
	}
	if r.red, err = testenv.StartRedis(ctx, testenv.RedisOptions{AppendOnly: !r.cfg.EmptyRedis, ShippedACL: true}); err != nil {
		return fmt.Errorf("starting redis-server: %w", err)
	}
	r.kc = patientClient(r.kin)
	arn, err := r.kin.CreateStream(ctx, streamName, r.plan.Shards)
	if err != nil {
		return fmt.Errorf("creating stream %s: %w", streamName, err)
	}
	if r.front, err = faultproxy.StartFront(r.kin.Endpoint, "127.0.0.1:0", r.cfg.Seed); err != nil {
		return err
	}
	if r.cfg.DeniedShard {
		if err := r.createDenied(ctx); err != nil {
			return err
		}
	}
	if r.cfg.EFO {
		if r.cutter, err = testenv.StartTCPProxy(strings.TrimPrefix(r.kin.TLSEndpoint, "https://")); err != nil {
			return err
		}
	}
	if r.cfg.OutputDown > 0 {
		r.sink = newOutageSink(r.cfg.Dir)
	}
	r.rc = r.red.Client()
	ck := checkpointer.DefaultConfig()
	ck.Group = group
	ck.LeasePeriod = r.plan.LeasePeriod
	r.store = checkpointer.NewFromClient(r.rc, ck, nil, nil).Stream(arn)
	return nil
}

// cleanup kills every child still running and waits for each, then stops
// the servers. It runs after the schedule ended, so no child starts later.
func (r *runner) cleanup() {
	r.mu.Lock()
	children := r.children
	r.mu.Unlock()
	for _, c := range children {
		_ = c.cmd.Process.Kill() // an exited child's error is of no interest
		<-c.done
	}
	if r.cutter != nil {
		r.cutter.Close()
	}
	if r.front != nil {
		_ = r.front.Close()
	}
	if r.sink != nil {
		r.sink.close()
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
	r.keepServerOutput()
}

// keepServerOutput writes what the emulator and Redis printed (their last
// MiB each) beside the instances' logs, so that a run the emulator or
// Redis broke can be read afterwards.
func (r *runner) keepServerOutput() {
	if r.cfg.Dir == "" {
		return
	}
	if r.kin != nil && r.kin.Process() != nil {
		r.keepOutput(r.kin.Kind+".log", r.kin.Process())
	}
	if r.red != nil && r.red.Process() != nil {
		r.keepOutput("redis-server.log", r.red.Process())
	}
}

func (r *runner) keepOutput(name string, p *testenv.Process) {
	if err := os.WriteFile(filepath.Join(r.cfg.Dir, name), []byte(p.Output()), 0o644); err != nil {
		r.logf("keeping the output of %s: %v", name, err)
	}
}

// patientClient is the emulator's client for the run's own calls (streams
// created and deleted, reshards, the shadow's reads): ten attempts rather
// than the SDK's three, so that a few seconds in which the emulator
// refuses new connections does not end a run of an hour (seed 8's hour
// ended at 15 min on a DeleteStream refused three times).
//
// Each attempt is bounded too (callTimeout): kinesis-mock, loaded by an
// hour with efo, has left a request unanswered for a minute while it
// answered others (seed 9: a DescribeStreamSummary, and one instance's
// GetRecords calls); the attempt after it is answered.
func patientClient(k *testenv.Kinesis) *kinesis.Client {
	return k.Client(func(o *kinesis.Options) {
		o.RetryMaxAttempts = 10
		o.HTTPClient = awshttp.NewBuildableClient().WithTimeout(callTimeout)
	})
}

// callTimeout bounds one attempt of the runner's own calls; the largest
// answer (10 MiB, the shadow's GetRecords) takes well under a second on
// loopback.
const callTimeout = 20 * time.Second

// emulatorPatience is how long the runner waits for a stream to be ACTIVE
// after it created or resharded it: kinesis-mock takes half a second, but
// under an hour's load has left requests unanswered for a minute.
const emulatorPatience = 3 * time.Minute

// stalledPatience is the most the runner waits for a stream to be ACTIVE
// when the emulator stalls meanwhile.
const stalledPatience = 10 * time.Minute

// waitActive waits until stream is ACTIVE, for emulatorPatience at most,
// not counting the time the soak's probe held the emulator stalled
// meanwhile (stalledFor), up to stalledPatience in all: kinesis-mock's TLS
// stalls grow through an hour with efo, and one of 3 min 56 s outlasted
// the patience of a reshard's wait (seed 9, 1 h with efo, 27 minutes in).
func (r *runner) waitActive(ctx context.Context, stream string) (string, error) {
	patience := cmp.Or(r.patience, emulatorPatience)
	if r.stalledFor == nil {
		return r.kin.WaitActiveWithin(ctx, stream, patience)
	}
	start, stalled0 := time.Now(), r.stalledFor()
	for {
		arn, err := r.kin.WaitActiveWithin(ctx, stream, max(patience-time.Since(start), time.Second))
		if err == nil || ctx.Err() != nil {
			return arn, err
		}
		limit := min(patience+r.stalledFor()-stalled0, max(stalledPatience, patience))
		if time.Since(start) >= limit {
			return arn, err
		}
		patience = limit
	}
}

// outlastStalls runs call, one of the runner's own mutations of the
// emulator's streams, again while it fails without an answer (a timeout or
// a dropped connection, not an error the emulator sent) and the soak's
// probe held the emulator stalled during it, up to stalledPatience of
// stall in all. The client's own ten attempts of 20 s gave up inside a
// stall of 6 min 21 s (seed 9, 1 h with efo, 50 minutes in: a
// DeleteStream). A call the emulator carried out but answered too late is
// told apart by its caller (the "earlier attempt" checks).
func (r *runner) outlastStalls(ctx context.Context, call func() error) error {
	if r.stalledFor == nil {
		return call()
	}
	stalled0 := r.stalledFor()
	for {
		before := r.stalledFor()
		err := call()
		var apiErr smithy.APIError
		if err == nil || ctx.Err() != nil || errors.As(err, &apiErr) {
			return err
		}
		now := r.stalledFor()
		if now == before || now-stalled0 >= stalledPatience {
			return err
		}
		r.logf("chaos: a call of the runner got no answer while the emulator stalled (%v of stall so far); sending it again: %v", (now - stalled0).Round(time.Second), err)
	}
}

// run starts the instances and the producer, runs the schedule during the
// load, waits for the consumers to catch up and checks what they delivered.
func (r *runner) run(ctx context.Context) (Table, error) {
	p := r.plan
	for _, name := range r.names() {
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
	if r.cfg.DeniedShard {
		denyReads(r.front)
	}
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

	// On the early returns cleanup kills the producer and waits for it.
	select {
	case <-producer.done:
		if producer.err != nil {
			return Table{}, fmt.Errorf("the producer process failed (see %s): %w", filepath.Join(r.cfg.Dir, "producer.log"), producer.err)
		}
	case <-time.After(producerDeadline(p)):
		return Table{}, fmt.Errorf("the producer did not finish %d batches within %v (see producer.log)", batches, producerDeadline(p))
	case <-ctx.Done():
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
	for _, name := range r.names() {
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
		ds, err := ReadDeliveries(withDeadLetters(r.outputFiles())...)
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
	if r.sink != nil {
		scenario, err := r.outageScenario()
		if err != nil {
			return Table{}, err
		}
		r.mu.Lock()
		r.scenario = scenario
		r.mu.Unlock()
	}
	all, err := ReadDeliveries(withHandovers(r.outputFiles())...)
	if err != nil {
		return Table{}, err
	}
	t := Check(r.counter, stream, all, append(r.windows, poisonWindows(all)...), r.kills, nil)
	if t.ACLRefusals, err = r.aclRefusals(ctx); err != nil {
		return Table{}, err
	}
	t.Injected = r.injected()
	t.EFO = r.cutter != nil
	t.Instances = len(r.names())
	r.mu.Lock()
	t.Scenario = r.scenario
	r.mu.Unlock()
	if r.cfg.Standbys {
		r.mu.Lock()
		t.Standbys = r.standbys
		r.mu.Unlock()
	}
	return t, nil
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
