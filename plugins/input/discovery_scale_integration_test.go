package input

import (
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/connect-kinesis/connect-kinesis/internal/faultproxy"
	"github.com/connect-kinesis/connect-kinesis/internal/testenv"
	"github.com/connect-kinesis/connect-kinesis/plugins/checkpointer"
)

// Issue 37's bound, as a user sees it: many streams of 4 shards created
// while 4 instances follow a pattern at the shortest discovery interval
// are all found, every shard of every stream is leased, and the shards
// are spread over every instance. 30 streams here: at 100 (the issue's
// figure, which `bench discovery` runs) the 1,600 leases' per-stream
// renewals and balancing rounds, under -race beside the rest of make
// test, timed Redis calls out and the test out (3 min 15 s); at 30 the
// same paths run. The time from each stream being ACTIVE
// to all its shards holding a live lease is logged (p50/p95/max) with the
// DescribeStreamSummary and ListShards calls the instances made, but not
// asserted: the machine is shared. `bench discovery` prints the verdict
// against 3 × stream_discovery_interval.
func TestIntegrationManyStreamsFoundAndLeased(t *testing.T) {
	t.Parallel()
	const (
		interval           = 5 * time.Second // streams.MinDiscoveryInterval
		instances, streams = 4, 30
		shards             = 4
	)
	emu := testenv.NewKinesisMock(t) // its own: its streams would slow the others' listings
	red := testenv.NewRedis(t)
	p, err := faultproxy.Start(emu.Endpoint, 37)
	require.NoError(t, err)
	t.Cleanup(func() { _ = p.Close() })
	prefix := uniquePrefix("tscale")

	// Readers of 400 idle shards poll slowly; an emulator on a shared
	// 2-core machine cannot serve 400 shards every 200 ms.
	extra := "  start_position: trim_horizon\n  idle_poll_interval: 5s\n"
	yaml := followingYAML(prefix+"*", p.URL, red.URL(), "", interval, extra)
	yaml = replaceOnce(yaml, "  poll_interval: 200ms\n", "  poll_interval: 1s\n")
	yaml = replaceOnce(yaml, "  shard_discovery_interval: 1s\n", "  shard_discovery_interval: 30s\n")
	col := &streamCollector{}
	logs := make([]*lockedBuffer, instances)
	for i := range instances {
		logs[i] = &lockedBuffer{}
		startFollowing(t, replaceOnce(yaml, "instance_id: \n", fmt.Sprintf("instance_id: i%d\n", i)), col, logs[i])
	}
	t.Cleanup(func() {
		if t.Failed() {
			for i, l := range logs {
				for _, line := range strings.Split(l.String(), "\n") {
					if !strings.Contains(line, "Reading stream") && line != "" {
						t.Logf("i%d: %.300s", i, line)
					}
				}
			}
		}
	})
	added := func() []int {
		var n []int
		for _, l := range logs {
			n = append(n, l.count("Reading stream "+prefix))
		}
		return n
	}

	cfg := checkpointer.DefaultConfig()
	cfg.RedisURL, cfg.Group = red.URL(), "g"
	ck, err := checkpointer.New(t.Context(), cfg, nil, nil)
	require.NoError(t, err)
	defer ck.Close()

	// Let the group list once (nothing matches yet), so every stream
	// below appears while the instances run.
	time.Sleep(interval)
	m := newLeaseWatch(ck, shards)
	began := time.Now()
	var wg sync.WaitGroup
	sem := make(chan struct{}, 8)
	for i := range streams {
		wg.Add(1)
		sem <- struct{}{}
		go func() {
			defer func() { <-sem; wg.Done() }()
			arn := emu.MustCreateStream(t, fmt.Sprintf("%s%03d", prefix, i), shards)
			m.active(arn, time.Now())
		}()
	}
	wg.Wait()
	t.Logf("created %d streams of %d shards in %v", streams, shards, time.Since(began).Round(time.Millisecond))

	deadline := 3*interval + 3*time.Minute // generous: the bound itself is bench discovery's
	require.Eventually(t, func() bool { return m.poll(t) == streams }, deadline, 250*time.Millisecond,
		"every shard of every new stream is leased")
	p50, p95, max := m.distribution(false)
	l50, l95, lmax := m.distribution(true)
	t.Logf("ACTIVE to listed in the group's discovery hash: p50 %v, p95 %v, max %v", l50, l95, lmax)
	t.Logf("ACTIVE to all %d shards leased, %d streams, %d instances, stream_discovery_interval %v: p50 %v, p95 %v, max %v (bound 3 × interval = %v)",
		shards, streams, instances, interval, p50, p95, max, 3*interval)
	t.Logf("streams each instance had added when the last was leased: %v", added())
	t.Logf("calls through the proxy since the start: DescribeStreamSummary %d, ListShards %d, ListStreams %d",
		p.Stats("DescribeStreamSummary").Requests, p.Stats("ListShards").Requests, p.Stats("ListStreams").Requests)

	// Every instance reads every stream (each follows the group's
	// result), and balancing spreads the 400 shards over every instance.
	require.Eventually(t, func() bool { return !slices.ContainsFunc(added(), func(n int) bool { return n < streams }) },
		deadline, 250*time.Millisecond, "every instance reads every new stream")
	t.Logf("every instance read every new stream %v after the first was created", time.Since(began).Round(10*time.Millisecond))
	var owners map[string]int
	assert.Eventually(t, func() bool {
		owners = m.owners(t)
		return len(owners) == instances
	}, 2*time.Minute, time.Second, "every instance holds some shards")
	t.Logf("shards held per instance: %v; streams added per instance: %v", owners, added())
}

// leaseWatch records, per stream, when it was ACTIVE and when all its
// shards first held a live lease, read through the checkpointer.
type leaseWatch struct {
	ck     *checkpointer.Checkpointer
	shards int

	mu     sync.Mutex
	since  map[string]time.Time     // arn -> ACTIVE
	listed map[string]time.Duration // arn -> ACTIVE to first in the group's discovery hash
	leased map[string]time.Duration // arn -> ACTIVE to all leased
}

func newLeaseWatch(ck *checkpointer.Checkpointer, shards int) *leaseWatch {
	return &leaseWatch{ck: ck, shards: shards, since: map[string]time.Time{}, listed: map[string]time.Duration{}, leased: map[string]time.Duration{}}
}

func (w *leaseWatch) active(arn string, at time.Time) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.since[arn] = at
}

// poll reads the leases of every stream not yet fully leased and returns
// how many streams are.
func (w *leaseWatch) poll(t *testing.T) int {
	w.mu.Lock()
	defer w.mu.Unlock()
	d, err := w.ck.ReadDiscovery(t.Context())
	require.NoError(t, err)
	for _, s := range d.Listed() {
		if at, ok := w.since[s.Key()]; ok && w.listed[s.Key()] == 0 {
			w.listed[s.Key()] = time.Since(at)
		}
	}
	for arn, at := range w.since {
		if _, ok := w.leased[arn]; ok {
			continue
		}
		ls, err := w.ck.Stream(arn).Leases(t.Context())
		require.NoError(t, err)
		n := 0
		for _, l := range ls {
			if l.Owner != "" && !l.Expired {
				n++
			}
		}
		if n == w.shards {
			w.leased[arn] = time.Since(at)
		}
	}
	return len(w.leased)
}

// distribution is the p50, p95 and max of the times to lease, or with
// listed of the times to the group's listing.
func (w *leaseWatch) distribution(listed bool) (p50, p95, max time.Duration) {
	w.mu.Lock()
	defer w.mu.Unlock()
	m := w.leased
	if listed {
		m = w.listed
	}
	var d []time.Duration
	for _, v := range m {
		d = append(d, v)
	}
	if len(d) == 0 {
		return 0, 0, 0
	}
	slices.Sort(d)
	at := func(q float64) time.Duration { return d[int(q*float64(len(d)-1)+0.5)].Round(10 * time.Millisecond) }
	return at(0.5), at(0.95), d[len(d)-1].Round(10 * time.Millisecond)
}

// owners counts the live leases of every watched stream by owner.
func (w *leaseWatch) owners(t *testing.T) map[string]int {
	w.mu.Lock()
	defer w.mu.Unlock()
	out := map[string]int{}
	for arn := range w.since {
		ls, err := w.ck.Stream(arn).Leases(t.Context())
		require.NoError(t, err)
		for _, l := range ls {
			if l.Owner != "" && !l.Expired {
				out[l.Owner]++
			}
		}
	}
	return out
}

// replaceOnce is strings.Replace of the first old, failing loudly when a
// helper's YAML changed and old is not there.
func replaceOnce(s, old, new string) string {
	if !strings.Contains(s, old) {
		panic(fmt.Sprintf("%q not in %q", old, s))
	}
	return strings.Replace(s, old, new, 1)
}
