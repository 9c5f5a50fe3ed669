package coordinator

import (
	"context"
	"fmt"
	"log/slog"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redpanda-data/benthos/v4/public/service"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/connect-kinesis/connect-kinesis/internal/consumer"
	"github.com/connect-kinesis/connect-kinesis/internal/consumer/consumertest"
)

// slowAcquireStore is the fake store whose takes cost d each and honour
// their context, as a Redis round trip does on a loaded node.
type slowAcquireStore struct {
	*consumertest.Store
	d time.Duration
}

func (s slowAcquireStore) Acquire(ctx context.Context, shard, owner string) (consumer.Take, error) {
	select {
	case <-time.After(s.d):
	case <-ctx.Done():
		return consumer.Take{}, fmt.Errorf("acquiring lease for shard %s: %w", shard, ctx.Err())
	}
	return s.Store.Acquire(ctx, shard, owner)
}

// TestTakesCutShortByTheRoundsDeadlineAreNotEachWarned guards the scale
// run's log flood (issue 61, 10,000 shards over 20 processes: 222,813 to
// 252,680 "Acquiring the lease failed: … context deadline exceeded" WARNs
// per process in 8 minutes): a balancing step runs under a deadline of a
// third of the lease period and takes free shards one store call at a
// time, so with many free shards the deadline passes mid-loop. The loop
// must stop there, leaving the rest to the next round, rather than try
// every remaining shard with a dead context and warn for each; the shards
// are all taken over the following rounds.
func TestTakesCutShortByTheRoundsDeadlineAreNotEachWarned(t *testing.T) {
	t.Parallel()
	var logs consumertest.SyncBuffer
	const shards = 120
	cfg := testConfig()
	st := slowAcquireStore{Store: consumertest.NewStore(cfg.LeasePeriod), d: 20 * time.Millisecond}
	startOverShards(t, cfg, shards, st, &logs)
	requireAllOwned(t, st.Store, shards, 30*time.Second)
	const warned = "Acquiring the lease failed"
	assert.Zero(t, logs.Count(warned), "a take the round's own deadline cut short is not a failure to warn of, once per shard: %s",
		firstLines(logs.String(), warned, 3))
}

// firstLines returns the first n lines of s holding sub.
func firstLines(s, sub string, n int) string {
	var out []string
	for _, l := range strings.Split(s, "\n") {
		if strings.Contains(l, sub) {
			out = append(out, l)
			if len(out) == n {
				break
			}
		}
	}
	return strings.Join(out, "\n")
}

// deadAcquireStore is slowAcquireStore counting the takes asked of it with
// a context already done.
type deadAcquireStore struct {
	slowAcquireStore
	dead *atomic.Int64
}

func (s deadAcquireStore) Acquire(ctx context.Context, shard, owner string) (consumer.Take, error) {
	if ctx.Err() != nil {
		s.dead.Add(1)
	}
	return s.slowAcquireStore.Acquire(ctx, shard, owner)
}

// TestABalancingStepMakesNoTakeOnceItsDeadlinePassed guards the store
// calls of the scale run's flood: past its step's deadline a balancing
// round stops taking, rather than send the store one doomed take per
// remaining free shard (silenced or not, each is a call).
func TestABalancingStepMakesNoTakeOnceItsDeadlinePassed(t *testing.T) {
	t.Parallel()
	const shards = 120
	cfg := testConfig()
	st := deadAcquireStore{slowAcquireStore{Store: consumertest.NewStore(cfg.LeasePeriod), d: 20 * time.Millisecond}, &atomic.Int64{}}
	startOverShards(t, cfg, shards, st, nil)
	requireAllOwned(t, st.Store, shards, 30*time.Second)
	assert.Zero(t, st.dead.Load(), "takes sent to the store with the step's deadline already passed")
}

// hungAcquireStore is the fake store whose takes never answer (a Redis
// that hangs on the take's script while heartbeats and renewals go
// through): each ends only when its context does.
type hungAcquireStore struct {
	*consumertest.Store
}

func (s hungAcquireStore) Acquire(ctx context.Context, shard, _ string) (consumer.Take, error) {
	<-ctx.Done()
	return consumer.Take{}, fmt.Errorf("acquiring lease for shard %s: %w", shard, ctx.Err())
}

// TestTakesThatNeverFinishWithinTheRoundAreWarned guards the silence the
// scale run's fix could bring: a round whose takes all outlast its
// deadline takes nothing, round after round, and the operator must see it
// at WARN (the shards stay unread), not only at DEBUG.
func TestTakesThatNeverFinishWithinTheRoundAreWarned(t *testing.T) {
	t.Parallel()
	var logs consumertest.SyncBuffer
	cfg := testConfig()
	st := hungAcquireStore{consumertest.NewStore(cfg.LeasePeriod)}
	startOverShards(t, cfg, 3, st, &logs)
	assertWarnedTakesNeverFinish(t, &logs)
}

// TestARoundOutOfTimeStillDropsLapsedRequests: a round whose deadline
// passed takes nothing more, but still forgets the shards it asked for
// whose holders never answered within askWait. Kept, such a request would
// hold the instance "settling" by load and take the shard when it freed
// much later, whatever its share.
func TestARoundOutOfTimeStillDropsLapsedRequests(t *testing.T) {
	t.Parallel()
	cfg := testConfig()
	st := consumertest.NewStore(cfg.LeasePeriod)
	co := &coordinator{c: &Consumer{owner: "me", cfg: cfg, metrics: consumer.NewMetrics(nil)}, store: st,
		readers: map[string]shardReader{}, listed: map[string]consumer.Shard{"a": {ID: "a"}, "b": {ID: "b"}}}
	co.asked = map[string]time.Time{
		"a": time.Now(),                        // fresh: kept for the next round
		"b": time.Now().Add(-2 * co.askWait()), // lapsed: dropped
	}
	ctx, cancel := context.WithDeadline(context.Background(), time.Now().Add(-time.Second))
	defer cancel()
	var ev roundEvents
	assert.Zero(t, co.takeAsked(ctx, map[string]consumer.LeaseState{}, &ev), "no take past the round's deadline")
	assert.Contains(t, co.asked, "a")
	assert.NotContains(t, co.asked, "b", "a lapsed request is dropped even by a round out of time")
	assert.True(t, ev.cutShort)
}

// batchingStore is the fake store with a batched take, counting its calls;
// each take costs d, as a round trip does, whatever the batch's size.
type batchingStore struct {
	*consumertest.Store
	d            time.Duration
	calls, sizes atomic.Int64
}

func (s *batchingStore) AcquireMany(ctx context.Context, shards []string, owner string) []consumer.TakeResult {
	s.calls.Add(1)
	s.sizes.Add(int64(len(shards)))
	out := make([]consumer.TakeResult, len(shards))
	select {
	case <-time.After(s.d):
	case <-ctx.Done():
		for i := range out {
			out[i].Err = ctx.Err()
		}
		return out
	}
	for i, sh := range shards {
		out[i].Take, out[i].Err = s.Store.Acquire(ctx, sh, owner)
	}
	return out
}

// TestARoundTakesManyShardsInOneCallEach guards the scale fix of issue 61:
// with a store that takes many shards a call (the Redis store), a round
// takes its free shards in calls of up to takeBatch, so a start of
// thousands of shards is bound by tens of round trips, not thousands. At
// 20 ms a call, 250 shards one call each would outlast the round's time
// (a third of the lease period) about twice; in batches every shard is
// owned in three calls.
func TestARoundTakesManyShardsInOneCallEach(t *testing.T) {
	t.Parallel()
	const shards = 250
	cfg := testConfig()
	st := &batchingStore{Store: consumertest.NewStore(cfg.LeasePeriod), d: 20 * time.Millisecond}
	startOverShards(t, cfg, shards, st, nil)
	requireAllOwned(t, st.Store, shards, 10*time.Second)
	assert.GreaterOrEqual(t, st.sizes.Load(), int64(shards), "every take goes through the batched call")
	assert.LessOrEqual(t, st.calls.Load(), int64(4), "%d takes in %d calls: batches of up to %d", st.sizes.Load(), st.calls.Load(), takeBatch)
}

// hungBatchStore is hungAcquireStore with a batched take (the Redis
// store's path): one call that never answers until its context ends.
type hungBatchStore struct {
	hungAcquireStore
}

func (s hungBatchStore) AcquireMany(ctx context.Context, shards []string, _ string) []consumer.TakeResult {
	<-ctx.Done()
	out := make([]consumer.TakeResult, len(shards))
	for i, sh := range shards {
		out[i].Err = fmt.Errorf("acquiring lease for shard %s: %w", sh, ctx.Err())
	}
	return out
}

// TestABatchedTakeThatNeverFinishesWithinTheRoundIsWarned guards the
// silence of a hung Redis on the batched path: with at most takeBatch free
// shards a round makes one call, which the deadline cuts short; no take
// is tried after it, so the round must still note it was cut short and
// say so at WARN, or the shards stay unread with nothing logged.
func TestABatchedTakeThatNeverFinishesWithinTheRoundIsWarned(t *testing.T) {
	t.Parallel()
	var logs consumertest.SyncBuffer
	cfg := testConfig()
	// A balancing period long beside the round's time: the round that was
	// cut short must say so itself, not a later one that finds the shards
	// free long enough to take them beyond its quota (longFree).
	cfg.RebalancePeriod = 20 * time.Second
	st := hungBatchStore{hungAcquireStore{consumertest.NewStore(cfg.LeasePeriod)}}
	startOverShards(t, cfg, 3, st, &logs)
	assertWarnedTakesNeverFinish(t, &logs)
}

// failingBatchStore is a store whose batched take fails as a whole, with
// one error every result carries (consumer.TakesBatcher), as the Redis
// store's does when its one script call times out on a slow node.
type failingBatchStore struct {
	*consumertest.Store
	err   error
	calls atomic.Int64
}

func (s *failingBatchStore) AcquireMany(_ context.Context, shards []string, _ string) []consumer.TakeResult {
	s.calls.Add(1)
	out := make([]consumer.TakeResult, len(shards))
	for i := range out {
		out[i].Err = s.err
	}
	return out
}

// TestABatchedTakeThatFailsAsAWholeIsWarnedOnce guards the log flood the
// batched take could bring back: a call that failed as a whole (a read
// timeout on a slow Redis, shorter than the round's time) is one failure,
// warned of once, not once per shard of its batch.
func TestABatchedTakeThatFailsAsAWholeIsWarnedOnce(t *testing.T) {
	var logs consumertest.SyncBuffer
	cfg := testConfig()
	st := &failingBatchStore{Store: consumertest.NewStore(cfg.LeasePeriod), err: fmt.Errorf("acquiring leases for 100 shards: i/o timeout")}
	co := &coordinator{c: &Consumer{owner: "me", cfg: cfg, metrics: consumer.NewMetrics(nil)}, store: st,
		readers: map[string]shardReader{}, listed: map[string]consumer.Shard{},
		log: service.NewLoggerFromSlog(slog.New(slog.NewTextHandler(&logs, nil)))}
	var ids []string
	for i := range takeBatch {
		ids = append(ids, fmt.Sprintf("shardId-%012d", i))
	}
	var ev roundEvents
	assert.Empty(t, co.takeUpTo(t.Context(), ids, len(ids), &ev))
	require.Equal(t, int64(1), st.calls.Load())
	assert.Equal(t, 1, logs.Count("Acquiring the lease failed"), "one WARN for the one failed call: %s", firstLines(logs.String(), "Acquiring", 3))
}

// TestARoundWithNoFreeShardIsNotCutShort guards a false alarm of the
// cut-short note: a round past its deadline that had no free shard to try
// took nothing for want of shards, not of time, and says nothing.
func TestARoundWithNoFreeShardIsNotCutShort(t *testing.T) {
	cfg := testConfig()
	co := &coordinator{c: &Consumer{owner: "me", cfg: cfg, metrics: consumer.NewMetrics(nil)}, store: consumertest.NewStore(cfg.LeasePeriod),
		readers: map[string]shardReader{}, listed: map[string]consumer.Shard{}}
	ctx, cancel := context.WithDeadline(t.Context(), time.Now().Add(-time.Second))
	defer cancel()
	var ev roundEvents
	assert.Empty(t, co.takeUpTo(ctx, nil, 5, &ev))
	assert.False(t, ev.cutShort, "no take was tried")
}

// startOverShards starts a consumer of one stream of n shards on st, logging
// to logs when it is set, and closes it when the test ends.
func startOverShards(t *testing.T, cfg consumer.Config, n int, st consumer.Store, logs *consumertest.SyncBuffer) {
	t.Helper()
	api := consumertest.NewKinesis()
	for i := range n {
		api.Add(fmt.Sprintf("shardId-%012d", i), &consumertest.KinesisShard{})
	}
	var log *service.Logger
	if logs != nil {
		log = service.NewLoggerFromSlog(slog.New(slog.NewTextHandler(logs, nil)))
	}
	c, err := New(cfg, api, func(string) consumer.Store { return st }, log, nil)
	require.NoError(t, err)
	require.NoError(t, c.Start(t.Context()))
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		_ = c.Close(ctx)
	})
}

// requireAllOwned waits until the fake store holds a lease of each of n
// shards.
func requireAllOwned(t *testing.T, st *consumertest.Store, n int, within time.Duration) {
	t.Helper()
	require.Eventually(t, func() bool {
		st.Mu.Lock()
		defer st.Mu.Unlock()
		owned := 0
		for _, l := range st.LeaseMap {
			if l.Owner != "" {
				owned++
			}
		}
		return owned == n
	}, within, 10*time.Millisecond, "every shard is taken over the rounds")
}

// assertWarnedTakesNeverFinish waits for a WARN that the round's takes
// never finish.
func assertWarnedTakesNeverFinish(t *testing.T, logs *consumertest.SyncBuffer) {
	t.Helper()
	assert.Eventually(t, func() bool {
		for _, l := range strings.Split(logs.String(), "\n") {
			if strings.Contains(l, "level=WARN") && strings.Contains(l, "Acquiring") {
				return true
			}
		}
		return false
	}, 3*time.Second, 20*time.Millisecond, "no WARN says the takes never finish; the log:\n%s", logs.String())
}
