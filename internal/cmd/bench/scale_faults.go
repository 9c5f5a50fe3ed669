package main

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"maps"
	"math"
	"math/big"
	"os"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/kinesis"
	"github.com/aws/aws-sdk-go-v2/service/kinesis/types"

	"github.com/connect-kinesis/connect-kinesis/internal/kinesisx"
	"github.com/connect-kinesis/connect-kinesis/plugins/checkpointer"
)

// failoverFigures is the SIGKILL of f.kill processes.
type failoverFigures struct {
	killed, procs int
	orphaned      int           // shards the killed processes held
	reowned       time.Duration // from the kill until a survivor owns every shard
	// moved counts the shards of survivors that changed owner from the kill
	// until the survivors were balanced: none had to.
	moved      int
	rebalanced time.Duration // until the survivors were balanced; 0: not within -timeout
	rejoined   time.Duration // from the killed processes' restart until the whole group was balanced again; 0: not within -timeout
}

// failover SIGKILLs the last f.kill processes, waits until their shards are
// owned again and the survivors are balanced, then restarts them and waits
// until the whole group is balanced again.
func (e *scaleEnv) failover(ctx context.Context, stores map[string]*checkpointer.Store, total int) (*failoverFigures, error) {
	f := e.f
	before, err := readLeases(ctx, stores)
	if err != nil {
		return nil, err
	}
	victims := e.procs[len(e.procs)-f.kill:]
	survivors := e.procs[:len(e.procs)-f.kill]
	dead := map[string]bool{}
	for _, p := range victims {
		dead[p.owner] = true
	}
	fig := &failoverFigures{killed: f.kill, procs: len(e.procs)}
	for _, o := range before.owner {
		if dead[o] {
			fig.orphaned++
		}
	}
	fmt.Fprintf(os.Stderr, "bench scale: failover: SIGKILL %d of %d processes (%d shards)...\n", f.kill, len(e.procs), fig.orphaned)
	start := time.Now()
	for _, p := range victims {
		p.kill()
	}
	moved := map[string]bool{}
	err = watch(ctx, stores, survivors, start, f.timeout, func(v leaseView, since time.Duration) (bool, error) {
		all := true
		for shard, o := range v.owner {
			was := before.owner[shard]
			if o != "" && was != "" && !dead[was] && o != was && !moved[shard] {
				moved[shard] = true
				// Named, so that the instances' logs (-keep) tell why.
				fmt.Fprintf(os.Stderr, "bench scale: failover: shard %s of live %s moved to %s, %v after the kill\n", shard, was, o, since.Round(100*time.Millisecond))
			}
			if o == "" || dead[o] {
				all = false
			}
		}
		if all && len(v.owner) == total && fig.reowned == 0 {
			fig.reowned = since
		}
		if fig.reowned != 0 && v.balanced(survivors, total) {
			fig.rebalanced = since
			return true, nil
		}
		return false, nil
	})
	if err != nil && !errors.Is(err, errWatchTimeout) {
		return nil, err
	}
	fig.moved = len(moved)
	fmt.Fprintf(os.Stderr, "bench scale: failover: owned again after %v; restarting the killed processes...\n", fig.reowned.Round(10*time.Millisecond))
	for _, p := range victims {
		if err := p.start(); err != nil {
			return nil, err
		}
	}
	start = time.Now()
	err = watch(ctx, stores, e.procs, start, f.timeout, func(v leaseView, since time.Duration) (bool, error) {
		if v.balanced(e.procs, total) {
			fig.rejoined = since
			return true, nil
		}
		return false, nil
	})
	if err != nil && !errors.Is(err, errWatchTimeout) {
		return nil, err
	}
	return fig, nil
}

// rollingFigures is the rolling restart under a keyed load.
type rollingFigures struct {
	// stepsQuiet counts the steps that ended settled but not balanced by
	// count: every shard owned and no lease moved for -step-quiet.
	stepsQuiet                    int
	loadedShards                  int
	written, unique, duplicates   int
	lost                          int
	unexpected                    int // read but not known written: a write whose call failed yet landed
	orderBroken                   int // a key's record read after a later one of the same key, by one process
	longestUnowned                time.Duration
	longestShard                  string
	steps, stepsLate, stopsForced int
	neverBack                     int // steps whose process owned nothing, or a shard stayed unowned, until -step-timeout
	longestBack, longestStep      time.Duration
	delivered                     bool
}

// rolling writes one record every f.loadEvery to each of f.loadPercent of
// the shards while it stops each process in turn with SIGTERM and starts it
// again, waiting for the group to be balanced before the next; then it
// waits for every record written to be read and checks them.
func (e *scaleEnv) rolling(ctx context.Context, stores map[string]*checkpointer.Store, total int) (*rollingFigures, error) {
	f := e.f
	c := scaleClient(e.kin.Endpoint())
	shards, err := kinesisx.ListAllShards(ctx, c, scaleStream)
	if err != nil {
		return nil, err
	}
	n := max(1, int(math.Ceil(float64(len(shards))*f.loadPercent/100)))
	step := len(shards) / n
	var loaded []types.Shard
	for i := 0; i < len(shards) && len(loaded) < n; i += step {
		loaded = append(loaded, shards[i])
	}
	fig := &rollingFigures{loadedShards: len(loaded)}
	fmt.Fprintf(os.Stderr, "bench scale: rolling restart of %d processes, one record every %v to each of %d shards...\n", len(e.procs), f.loadEvery, len(loaded))

	loadCtx, stopLoad := context.WithCancel(ctx)
	defer stopLoad()
	w := &keyedWriter{written: map[string]bool{}}
	var loadErr error
	var wg sync.WaitGroup
	wg.Go(func() { loadErr = w.run(loadCtx, c, loaded, f.loadEvery) })

	// The unowned watcher samples every shard's lease every 250 ms.
	var mu sync.Mutex
	since := map[string]time.Time{}
	watchCtx, stopWatch := context.WithCancel(ctx)
	defer stopWatch()
	var watchErr error
	wg.Go(func() {
		watchErr = watch(watchCtx, stores, nil, time.Now(), 24*time.Hour, func(v leaseView, _ time.Duration) (bool, error) {
			now := time.Now()
			mu.Lock()
			defer mu.Unlock()
			for shard, o := range v.owner {
				if o != "" {
					delete(since, shard)
					continue
				}
				t0, ok := since[shard]
				if !ok {
					since[shard] = now
					continue
				}
				if d := now.Sub(t0); d > fig.longestUnowned {
					fig.longestUnowned, fig.longestShard = d, shard
				}
			}
			return false, nil
		})
	})

	for _, p := range e.procs {
		t0 := time.Now()
		if !p.stop(f.stepTimeout) {
			fig.stopsForced++
		}
		if err := p.start(); err != nil {
			return nil, err
		}
		step := &stepWatch{proc: p, procs: e.procs, total: total, quiet: f.stepQuiet}
		var counts []int
		err := watch(ctx, stores, e.procs, t0, f.stepTimeout, func(v leaseView, since time.Duration) (bool, error) {
			counts = v.counts(e.procs)
			return step.settled(v, since), nil
		})
		back := step.back
		if step.byQuiet {
			fig.stepsQuiet++
		}
		if errors.Is(err, errWatchTimeout) {
			fig.stepsLate++
		} else if err != nil {
			return nil, err
		}
		if back == 0 {
			fig.neverBack++
		}
		fig.steps++
		fig.longestBack = max(fig.longestBack, back)
		fig.longestStep = max(fig.longestStep, time.Since(t0))
		fmt.Fprintf(os.Stderr, "bench scale: rolling restart: %s back after %v, step ended after %v, shards per process %v\n",
			p.name, back.Round(100*time.Millisecond), time.Since(t0).Round(100*time.Millisecond), counts)
	}
	stopLoad()
	stopWatch()
	wg.Wait()
	if loadErr != nil && !errors.Is(loadErr, context.Canceled) {
		return nil, loadErr
	}
	if watchErr != nil && !errors.Is(watchErr, context.Canceled) {
		return nil, watchErr
	}

	fig.written = len(w.written)
	deadline := time.Now().Add(f.timeout)
	for {
		r, err := readKeyed(e.procs)
		if err != nil {
			return nil, err
		}
		fig.unique, fig.duplicates, fig.orderBroken = 0, 0, r.orderBroken
		fig.unexpected = 0
		for line, k := range r.seen {
			if w.written[line] {
				fig.unique++
			} else {
				fig.unexpected++
			}
			fig.duplicates += k - 1
		}
		fig.lost = fig.written - fig.unique
		if fig.lost == 0 || time.Now().After(deadline) {
			fig.delivered = fig.lost == 0
			return fig, nil
		}
		if err := sleepCtx(ctx, time.Second); err != nil {
			return nil, err
		}
	}
}

// keyedWriter writes "<key> <n>" records, n counting up per key, one key per
// loaded shard (an explicit hash key at the shard's start).
type keyedWriter struct {
	written map[string]bool // lines the service accepted
}

func (w *keyedWriter) run(ctx context.Context, c *kinesis.Client, shards []types.Shard, every time.Duration) error {
	keys := make([]string, len(shards))
	hashes := make([]string, len(shards))
	for i, s := range shards {
		h, ok := new(big.Int).SetString(aws.ToString(s.HashKeyRange.StartingHashKey), 10)
		if !ok {
			return fmt.Errorf("shard %s: malformed starting hash key", aws.ToString(s.ShardId))
		}
		keys[i], hashes[i] = "k-"+aws.ToString(s.ShardId), h.String()
	}
	next := make([]int, len(shards))
	tick := time.NewTicker(every)
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-tick.C:
		}
		for lo := 0; lo < len(shards); lo += kinesisx.MaxPutRecordsCount {
			hi := min(lo+kinesisx.MaxPutRecordsCount, len(shards))
			entries := make([]types.PutRecordsRequestEntry, 0, hi-lo)
			lines := make([]string, 0, hi-lo)
			for i := lo; i < hi; i++ {
				line := fmt.Sprintf("%s %d", keys[i], next[i])
				next[i]++
				lines = append(lines, line)
				entries = append(entries, types.PutRecordsRequestEntry{
					Data: []byte(line), PartitionKey: aws.String(keys[i]), ExplicitHashKey: aws.String(hashes[i]),
				})
			}
			out, err := c.PutRecords(ctx, &kinesis.PutRecordsInput{StreamName: aws.String(scaleStream), Records: entries})
			if err != nil {
				if ctx.Err() != nil {
					return ctx.Err()
				}
				// Not known written: if it landed it is counted
				// unexpected, never lost.
				fmt.Fprintf(os.Stderr, "bench scale: keyed load: %v\n", err)
				continue
			}
			for i, r := range out.Records {
				if r.ErrorCode == nil {
					w.written[lines[i]] = true
				}
			}
		}
	}
}

// keyedRead is what the processes' output files hold.
type keyedRead struct {
	seen        map[string]int // line -> times read
	orderBroken int
}

// readKeyed reads every output file of every start of procs. Within one
// file a key's numbers must not go down: a process reads a shard in order.
// (Across files the interleaving is unknown, so it is not judged.)
func readKeyed(procs []*scaleProc) (keyedRead, error) {
	r := keyedRead{seen: map[string]int{}}
	for _, p := range procs {
		for _, path := range p.outs {
			b, err := os.ReadFile(path)
			if errors.Is(err, os.ErrNotExist) {
				continue
			}
			if err != nil {
				return r, err
			}
			if i := bytes.LastIndexByte(b, '\n'); i >= 0 {
				b = b[:i+1]
			} else {
				continue
			}
			last := map[string]int{}
			sc := bufio.NewScanner(bytes.NewReader(b))
			for sc.Scan() {
				line := sc.Text()
				r.seen[line]++
				key, num, ok := strings.Cut(line, " ")
				if !ok {
					continue
				}
				n, err := strconv.Atoi(num)
				if err != nil {
					continue
				}
				if prev, ok := last[key]; ok && n < prev {
					r.orderBroken++
				}
				last[key] = max(n, last[key])
			}
			if err := sc.Err(); err != nil {
				return r, err
			}
		}
	}
	return r, nil
}

// stepWatch follows one restart of the rolling restart. The process is
// back once every shard is owned and it owns some; the step then waits
// for the group to settle: balanced by count, or no lease changing hands
// for quiet (lease.balance load evens bytes, not counts, and an
// operator's next restart waits for the moves to stop, not for a count
// the group does not aim at).
type stepWatch struct {
	proc  *scaleProc
	procs []*scaleProc
	total int
	quiet time.Duration

	// back is when the process was back (0: not yet); byQuiet says the
	// step settled by the quiet rule, not balanced by count.
	back    time.Duration
	byQuiet bool
	changed time.Duration
	last    map[string]string
}

// settled takes a reading of the leases since after the SIGTERM and says
// whether the step has ended.
func (s *stepWatch) settled(v leaseView, since time.Duration) bool {
	if !maps.Equal(s.last, v.owner) {
		s.last, s.changed = v.owner, since
	}
	if s.back == 0 && v.owned() == s.total && v.counts([]*scaleProc{s.proc})[0] > 0 {
		s.back = since
	}
	switch {
	case s.back == 0:
		return false
	case v.balanced(s.procs, s.total):
		return true
	case since-max(s.changed, s.back) >= s.quiet:
		s.byQuiet = true
		return true
	}
	return false
}
