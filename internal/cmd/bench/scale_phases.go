package main

import (
	"context"
	"fmt"
	"os"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/connect-kinesis/connect-kinesis/plugins/checkpointer"
)

// scaleEnv is what the scale part's phases share: the Kinesis, the Redis
// and the processes of the group being measured.
type scaleEnv struct {
	f     scaleFlags
	dir   string
	kin   scaleKinesis
	red   *scaleRedis
	procs []*scaleProc
}

// scaleTable is every figure the part prints; a phase skipped leaves its
// figures nil.
type scaleTable struct {
	one, many       *startFigures
	oneIdle         *idleFigures
	manyIdle        *idleFigures
	failover        *failoverFigures
	rolling         *rollingFigures
	streamsPerNode  map[string]int // the many streams' slots, by master
	oneStreamMaster string         // the master holding the one stream's slot
}

// stopAll stops the group's processes gracefully, all at once.
func (e *scaleEnv) stopAll() {
	var wg sync.WaitGroup
	for _, p := range e.procs {
		wg.Go(func() { p.stop(30 * time.Second) })
	}
	wg.Wait()
	e.procs = nil
}

// leaseView is the group's leases at one moment: each shard's live owner,
// "" for a shard with no live lease.
type leaseView struct {
	owner map[string]string
	takes int64 // the fencing tokens' sum: every acquisition adds one
}

func (v leaseView) owned() int {
	n := 0
	for _, o := range v.owner {
		if o != "" {
			n++
		}
	}
	return n
}

// counts is the shards each of procs owns.
func (v leaseView) counts(procs []*scaleProc) []int {
	by := map[string]int{}
	for _, o := range v.owner {
		by[o]++
	}
	out := make([]int, len(procs))
	for i, p := range procs {
		out[i] = by[p.owner]
	}
	return out
}

// balanced says whether all total shards are owned and every one of procs
// holds its share: floor or ceil of total / len(procs).
func (v leaseView) balanced(procs []*scaleProc, total int) bool {
	if v.owned() != total {
		return false
	}
	c := v.counts(procs)
	return slices.Min(c) >= total/len(procs) && slices.Max(c) <= (total+len(procs)-1)/len(procs)
}

// benchLeaseReads counts the bench's own lease reads, each one script call,
// so that the start's Redis figures leave them out.
var benchLeaseReads atomic.Int64

// readLeases reads every stream's leases, keyed "stream/shard".
func readLeases(ctx context.Context, stores map[string]*checkpointer.Store) (leaseView, error) {
	v := leaseView{owner: map[string]string{}}
	for id, st := range stores {
		benchLeaseReads.Add(1)
		ls, err := st.Leases(ctx)
		if err != nil {
			return v, err
		}
		for shard, l := range ls {
			v.takes += l.Token
			if l.Expired {
				v.owner[id+"/"+shard] = ""
			} else {
				v.owner[id+"/"+shard] = l.Owner
			}
		}
	}
	return v, nil
}

// watch reads the leases and calls fn with each reading and the time since
// start, until fn says done, ctx ends or limit passes. It reads every
// 250 ms, or 100 µs per shard when that is longer (a second at 10,000
// shards): each reading is a script over every lease on the stream's
// master, which at that size costs the master more than the group it
// measures. A reading that fails (a CLUSTERDOWN while a loaded Cluster
// re-checks a slow node, a timeout) is skipped and said once; the limit
// still bounds the wait.
func watch(ctx context.Context, stores map[string]*checkpointer.Store, procs []*scaleProc, start time.Time, limit time.Duration,
	fn func(v leaseView, since time.Duration) (done bool, err error),
) error {
	every := 250 * time.Millisecond
	tick := time.NewTimer(every)
	defer tick.Stop()
	deadline := time.After(limit)
	var failed string
	for {
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-deadline:
			if failed != "" {
				return fmt.Errorf("%w (the last reading failed: %s)", errWatchTimeout, failed)
			}
			return errWatchTimeout
		case <-tick.C:
		}
		if err := checkAlive(procs); err != nil {
			return err
		}
		v, err := readLeases(ctx, stores)
		if err != nil {
			if ctx.Err() != nil {
				return ctx.Err()
			}
			if failed == "" {
				fmt.Fprintf(os.Stderr, "bench scale: reading the leases failed, skipping the reading: %v\n", err)
			}
			failed = err.Error()
			tick.Reset(every)
			continue
		}
		failed = ""
		if done, err := fn(v, time.Since(start)); done || err != nil {
			return err
		}
		every = max(250*time.Millisecond, time.Duration(len(v.owner))*100*time.Microsecond)
		tick.Reset(every)
	}
}

var errWatchTimeout = fmt.Errorf("timed out")

// startFigures is one start of the group, times since the first process
// started.
type startFigures struct {
	streams, total     int
	lastStart          time.Duration
	allOwned, balanced time.Duration
	// ownedForGood is when every shard was owned for the last time before
	// balance: a take, a hand-off or an expiry may leave a shard unowned
	// after the first moment all were.
	ownedForGood            time.Duration
	ownedDrops              int // readings with a shard unowned after all had been owned
	takes                   int64
	counts                  []int
	redisScripts, redisCmds int64 // on the masters, from the first start to balanced
}

// startGroup starts f.procs processes evenly over f.spread, reading
// streamsYAML in group, and waits until every one of the total shards of
// stores is owned and the group is balanced.
func (e *scaleEnv) startGroup(ctx context.Context, label, streamsYAML, group string, stores map[string]*checkpointer.Store, total int) (*startFigures, error) {
	f := e.f
	for i := range f.procs {
		p, err := newScaleProc(e.dir, e.f.bin, i, streamsYAML, group, e.kin.Endpoint(), e.red, f)
		if err != nil {
			return nil, err
		}
		e.procs = append(e.procs, p)
	}
	stats0, err := e.red.stats(ctx)
	if err != nil {
		return nil, err
	}
	reads0 := benchLeaseReads.Load()
	fig := &startFigures{streams: len(stores), total: total}
	start := time.Now()
	started := 0
	launch := func(since time.Duration) error {
		for started < len(e.procs) {
			at := time.Duration(0)
			if len(e.procs) > 1 {
				at = f.spread * time.Duration(started) / time.Duration(len(e.procs)-1)
			}
			if since < at {
				return nil
			}
			if err := e.procs[started].start(); err != nil {
				return err
			}
			started++
			fig.lastStart = time.Since(start)
		}
		return nil
	}
	if err := launch(0); err != nil {
		return nil, err
	}
	fmt.Fprintf(os.Stderr, "bench scale: %s: starting %d processes over %v...\n", label, f.procs, f.spread)
	last := time.Now()
	err = watch(ctx, stores, e.procs[:1], start, f.timeout, func(v leaseView, since time.Duration) (bool, error) {
		if err := launch(since); err != nil {
			return false, err
		}
		if err := checkAlive(e.procs[:started]); err != nil {
			return false, err
		}
		fig.takes, fig.counts = v.takes, v.counts(e.procs)
		switch {
		case v.owned() < total && fig.allOwned != 0:
			fig.ownedForGood = 0
			fig.ownedDrops++
		case v.owned() == total && fig.allOwned == 0:
			fig.allOwned, fig.ownedForGood = since, since
		case v.owned() == total && fig.ownedForGood == 0:
			fig.ownedForGood = since
		}
		if started == len(e.procs) && v.balanced(e.procs, total) {
			fig.balanced = since
			return true, nil
		}
		if time.Since(last) > 10*time.Second {
			fmt.Fprintf(os.Stderr, "bench scale: %s: t=%v owned %d of %d, per process %v\n", label, since.Round(time.Second), v.owned(), total, fig.counts)
			last = time.Now()
		}
		return false, nil
	})
	if err == errWatchTimeout {
		return nil, fmt.Errorf("%s: not balanced after %v: shards per process %v", label, f.timeout, fig.counts)
	}
	if err != nil {
		return nil, err
	}
	stats1, err := e.red.stats(ctx)
	if err != nil {
		return nil, err
	}
	// The bench's lease reads are script calls of one HGETALL each (and
	// one TIME): left out of both figures.
	d := diffNodes(stats0, stats1)
	reads := benchLeaseReads.Load() - reads0
	fig.redisScripts, fig.redisCmds = d.masterScripts()-reads, d.masterTotal()-3*reads
	return fig, nil
}

// oneStream runs the phases on one stream of f.shards shards: start, idle,
// failover, rolling restart.
func (e *scaleEnv) oneStream(ctx context.Context, t *scaleTable) error {
	f := e.f
	fmt.Fprintf(os.Stderr, "bench scale: creating a stream of %d shards...\n", f.shards)
	id, err := e.kin.CreateStream(ctx, scaleStream, f.shards)
	if err != nil {
		return err
	}
	stores := e.storesFor(scaleGroup, id)
	if t.oneStreamMaster, err = e.masterOf(ctx, stores[id]); err != nil {
		return err
	}
	if t.one, err = e.startGroup(ctx, "one stream", scaleStream, scaleGroup, stores, f.shards); err != nil {
		return err
	}
	fmt.Fprintf(os.Stderr, "bench scale: balanced after %v; settling %v, then measuring %v idle...\n", t.one.balanced.Round(10*time.Millisecond), f.settle, f.idle)
	if err := sleepCtx(ctx, f.settle); err != nil {
		return err
	}
	if t.oneIdle, err = e.measureIdle(ctx, stores, f.idle); err != nil {
		return err
	}
	if f.kill > 0 {
		if t.failover, err = e.failover(ctx, stores, f.shards); err != nil {
			return err
		}
	}
	if f.loadPercent > 0 {
		if t.rolling, err = e.rolling(ctx, stores, f.shards); err != nil {
			return err
		}
	}
	e.stopAll()
	return nil
}

// manyStreams creates f.streams streams of f.streamShards shards and
// starts a group of its own on a pattern matching them.
func (e *scaleEnv) manyStreams(ctx context.Context, t *scaleTable) error {
	f := e.f
	fmt.Fprintf(os.Stderr, "bench scale: creating %d streams of %d shards...\n", f.streams, f.streamShards)
	ids := make([]string, f.streams)
	var mu sync.Mutex
	var firstErr error
	sem := make(chan struct{}, 8)
	var wg sync.WaitGroup
	for i := range f.streams {
		wg.Go(func() {
			sem <- struct{}{}
			defer func() { <-sem }()
			id, err := e.kin.CreateStream(ctx, fmt.Sprintf("%s%03d", scaleMultiPrefix, i), f.streamShards)
			mu.Lock()
			defer mu.Unlock()
			if err != nil && firstErr == nil {
				firstErr = err
			}
			ids[i] = id
		})
	}
	wg.Wait()
	if firstErr != nil {
		return firstErr
	}
	stores := e.storesFor(scaleMultiGroup, ids...)
	t.streamsPerNode = map[string]int{}
	for _, st := range stores {
		m, err := e.masterOf(ctx, st)
		if err != nil {
			return err
		}
		t.streamsPerNode[m]++
	}
	var err error
	if t.many, err = e.startGroup(ctx, "many streams", "'"+scaleMultiPrefix+"*'", scaleMultiGroup, stores, f.streams*f.streamShards); err != nil {
		return err
	}
	if f.multiIdle > 0 {
		fmt.Fprintf(os.Stderr, "bench scale: balanced after %v; settling %v, then measuring %v idle...\n", t.many.balanced.Round(10*time.Millisecond), f.settle, f.multiIdle)
		if err := sleepCtx(ctx, f.settle); err != nil {
			return err
		}
		if t.manyIdle, err = e.measureIdle(ctx, stores, f.multiIdle); err != nil {
			return err
		}
	}
	e.stopAll()
	return nil
}

// storesFor opens the group's store of each stream id, keyed by id.
func (e *scaleEnv) storesFor(group string, ids ...string) map[string]*checkpointer.Store {
	cfg := checkpointer.DefaultConfig()
	cfg.Group = group
	ck := checkpointer.NewFromClient(e.red.client, cfg, nil, nil)
	out := make(map[string]*checkpointer.Store, len(ids))
	for _, id := range ids {
		out[id] = ck.Stream(id)
	}
	return out
}

// masterOf names the node holding the store's keys: its hash tag's slot's
// master on a Cluster, the one server otherwise.
func (e *scaleEnv) masterOf(ctx context.Context, st *checkpointer.Store) (string, error) {
	cc, ok := e.red.client.(*redis.ClusterClient)
	if !ok {
		return e.red.nodes[0].Addr, nil
	}
	m, err := cc.MasterForKey(ctx, st.Keys().Leases)
	if err != nil {
		return "", fmt.Errorf("finding the master of %s: %w", st.Keys().Leases, err)
	}
	return m.Options().Addr, nil
}
