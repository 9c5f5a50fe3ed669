package checkpointer

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/connect-kinesis/connect-kinesis/internal/consumer"
	"github.com/connect-kinesis/connect-kinesis/internal/testenv"
)

func startMarkWriter(t *testing.T, s *Store, interval time.Duration) *MarkWriter {
	t.Helper()
	w := s.NewMarkWriter("a", interval)
	ctx, cancel := context.WithCancel(t.Context())
	done := make(chan struct{})
	go func() { defer close(done); w.Run(ctx) }()
	t.Cleanup(func() { cancel(); <-done })
	return w
}

// 64 readers asking for new positions as fast as they are answered cost
// one call per interval for all of them (and the bucket's burst at the
// start), and every answer is a write that covers what was asked.
func TestIntegrationMarkWriterOneCallPerInterval(t *testing.T) {
	t.Parallel()
	r := testenv.NewRedis(t)
	s := joinedStore(t, backend{url: r.URL(), kind: KindSimple})
	leases := make([]consumer.Lease, 64)
	for i := range leases {
		leases[i] = marked(t, s, fmt.Sprintf("shardId-%012d", i), "a").Lease
	}
	// Loaded once, so that EVALSHA is not answered NOSCRIPT (EVAL follows).
	_, err := s.WriteDelivered(t.Context(), "a", []DeliveredMark{mark(leases[0], pos(t, "1"))})
	require.NoError(t, err)
	const interval = 50 * time.Millisecond
	w := startMarkWriter(t, s, interval)
	var rt roundTrips
	s.c.client.AddHook(&rt)

	start := time.Now()
	var wg sync.WaitGroup
	last := make([]consumer.Position, len(leases))
	for i, l := range leases {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for n := 1; n <= 10; n++ {
				p := consumer.Position{Sequence: fmt.Sprintf("%d%03d", 4959+i, n)}
				assert.NoError(t, w.Cover(t.Context(), l, p))
				last[i] = p
			}
		}()
	}
	wg.Wait()
	elapsed := time.Since(start)
	calls := rt.n.Load()
	t.Logf("64 shards x 10 asks each: %d calls in %v (interval %v)", calls, elapsed, interval)
	// One call an interval, and the bucket's burst at once at the start.
	assert.LessOrEqual(t, calls, int64(elapsed/interval)+markBurst, "at most one call per interval, and the burst")
	assert.GreaterOrEqual(t, calls, int64(10), "each reader's 10 asks waited for 10 writes")

	got, err := s.Delivered(t.Context())
	require.NoError(t, err)
	for i, l := range leases {
		assert.Equal(t, last[i], got[l.Shard])
	}
	// A position covered already is answered without a call.
	rt.n.Store(0)
	require.NoError(t, w.Cover(t.Context(), leases[0], consumer.Position{Sequence: "1"}))
	assert.Zero(t, rt.n.Load())
}

// Guards the write-ahead mark's cost (issue 59, the input's reading at
// 0.89x the raw loop): an ask that comes soon after a write, from a stream
// whose readers ask less often than once an interval, waited for the rest
// of the interval, and every fetched answer of a busy shard waited that
// long before it went to the pipeline. It waits only for the call now.
func TestIntegrationMarkWriterAskAfterAWriteWaitsOnlyForTheCall(t *testing.T) {
	t.Parallel()
	r := testenv.NewRedis(t)
	s := joinedStore(t, backend{url: r.URL(), kind: KindSimple})
	a, b := marked(t, s, "shardId-000000000000", "a").Lease, marked(t, s, "shardId-000000000001", "a").Lease
	// Loaded once, so that EVALSHA is not answered NOSCRIPT (EVAL follows).
	_, err := s.WriteDelivered(t.Context(), "a", []DeliveredMark{mark(a, pos(t, "1"))})
	require.NoError(t, err)
	const interval = 2 * time.Second
	w := startMarkWriter(t, s, interval)
	require.NoError(t, w.Cover(t.Context(), a, pos(t, "2")))
	asked := time.Now()
	require.NoError(t, w.Cover(t.Context(), b, pos(t, "3")))
	waited := time.Since(asked)
	t.Logf("the second ask, made just after the first write, waited %v (interval %v)", waited, interval)
	assert.Less(t, waited, interval/2, "an ask after a quiet spell waits for the call, not for the rest of the interval")
}

// A reader whose lease was taken is told so and delivers nothing more; a
// Redis that does not answer leaves readers waiting (never told "written"),
// and once it answers again the write lands and they go on.
func TestIntegrationMarkWriterFencedAndRedisAway(t *testing.T) {
	t.Parallel()
	r := testenv.NewRedis(t)
	s := joinedStore(t, backend{url: r.URL(), kind: KindSimple})
	ctx := t.Context()
	w := startMarkWriter(t, s, 20*time.Millisecond)

	gone := marked(t, s, "shard-0", "a").Lease
	require.NoError(t, s.Release(ctx, gone))
	marked(t, s, "shard-0", "b")
	err := w.Cover(ctx, gone, pos(t, "10"))
	require.ErrorIs(t, err, consumer.ErrLeaseLost)

	l := marked(t, s, "shard-1", "a").Lease
	require.NoError(t, w.Cover(ctx, l, pos(t, "10")))
	require.NoError(t, r.Pause())
	resumed := false
	defer func() {
		if !resumed {
			_ = r.Resume()
		}
	}()
	ask := w.Ask(l, pos(t, "20"))
	select {
	case err := <-ask:
		t.Fatalf("answered %v while Redis could not be written", err)
	case <-time.After(time.Second):
	}
	require.NoError(t, r.Resume())
	resumed = true
	select {
	case err := <-ask:
		require.NoError(t, err)
	case <-time.After(15 * time.Second):
		t.Fatal("no answer after Redis came back")
	}
	got, err := s.Delivered(ctx)
	require.NoError(t, err)
	assert.Equal(t, pos(t, "20"), got["shard-1"])
}

// failingScripts fails every script call slowly while failing is set, and
// records when each script call began and ended.
type failingScripts struct {
	slow    time.Duration
	failing atomic.Bool
	mu      sync.Mutex
	calls   [][2]time.Time
}

func (f *failingScripts) DialHook(next redis.DialHook) redis.DialHook { return next }
func (f *failingScripts) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		if name := cmd.Name(); name != "evalsha" && name != "eval" {
			return next(ctx, cmd)
		}
		began := time.Now()
		var err error
		if f.failing.Load() {
			time.Sleep(f.slow)
			err = errors.New("injected failure")
			cmd.SetErr(err)
		} else {
			err = next(ctx, cmd)
		}
		f.mu.Lock()
		f.calls = append(f.calls, [2]time.Time{began, time.Now()})
		f.mu.Unlock()
		return err
	}
}
func (f *failingScripts) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return next
}

// Guards the retry pace after a failed write (issue 59, 4eb7aa3): a write
// that fails after taking longer than an interval is tried again a whole
// interval after it failed, not at once from a bucket refilled while the
// call hung, and no ask is answered while the writes fail.
func TestIntegrationMarkWriterFailedWriteIsRetriedAnIntervalAfterItFailed(t *testing.T) {
	t.Parallel()
	r := testenv.NewRedis(t)
	s := joinedStore(t, backend{url: r.URL(), kind: KindSimple})
	l := marked(t, s, "shardId-000000000000", "a").Lease
	// Loaded once, so that EVALSHA is not answered NOSCRIPT (EVAL follows).
	_, err := s.WriteDelivered(t.Context(), "a", []DeliveredMark{mark(l, pos(t, "1"))})
	require.NoError(t, err)
	const interval = 100 * time.Millisecond
	hook := &failingScripts{slow: 3 * interval}
	hook.failing.Store(true)
	s.c.client.AddHook(hook)
	w := startMarkWriter(t, s, interval)

	ask := w.Ask(l, pos(t, "2"))
	select {
	case err := <-ask:
		t.Fatalf("answered %v while every write failed", err)
	case <-time.After(2 * time.Second):
	}
	hook.failing.Store(false)
	select {
	case err := <-ask:
		require.NoError(t, err)
	case <-time.After(5 * time.Second):
		t.Fatal("no answer once the writes work again")
	}

	hook.mu.Lock()
	calls := slices.Clone(hook.calls)
	hook.mu.Unlock()
	require.GreaterOrEqual(t, len(calls), 3)
	for i := 1; i < len(calls); i++ {
		gap := calls[i][0].Sub(calls[i-1][1])
		assert.GreaterOrEqual(t, gap, interval-10*time.Millisecond, "call %d began %v after the failed call %d ended", i, gap, i-1)
	}
}

// Guards the merging of asks for one shard (issue 59): asks made for the
// same shard before their write, or while a write that fails is under way,
// are answered by one write of the highest of them, never by a write of a
// lower one that leaves a record handed over unmarked.
func TestIntegrationMarkWriterMergedAsksAreWrittenAtTheirHighest(t *testing.T) {
	t.Parallel()
	r := testenv.NewRedis(t)
	s := joinedStore(t, backend{url: r.URL(), kind: KindSimple})
	a, b := marked(t, s, "shardId-000000000000", "a").Lease, marked(t, s, "shardId-000000000001", "a").Lease
	// Loaded once, so that EVALSHA is not answered NOSCRIPT (EVAL follows).
	_, err := s.WriteDelivered(t.Context(), "a", []DeliveredMark{mark(a, pos(t, "1"))})
	require.NoError(t, err)
	const interval = 100 * time.Millisecond
	hook := &failingScripts{slow: 3 * interval}
	hook.failing.Store(true)
	s.c.client.AddHook(hook)
	w := startMarkWriter(t, s, interval)

	// a's higher ask is in the failing write when its lower one is made;
	// b's two asks wait together for the next write.
	answers := []<-chan error{w.Ask(a, pos(t, "9"))}
	time.Sleep(interval)
	answers = append(answers, w.Ask(a, pos(t, "5")), w.Ask(b, pos(t, "5")), w.Ask(b, pos(t, "9")))
	time.Sleep(time.Second)
	for i, ch := range answers {
		select {
		case err := <-ch:
			t.Fatalf("ask %d answered %v while every write failed", i, err)
		default:
		}
	}
	hook.failing.Store(false)
	for i, ch := range answers {
		select {
		case err := <-ch:
			require.NoError(t, err, "ask %d", i)
		case <-time.After(5 * time.Second):
			t.Fatalf("ask %d not answered once the writes work again", i)
		}
	}
	got, err := s.Delivered(t.Context())
	require.NoError(t, err)
	assert.Equal(t, pos(t, "9"), got[a.Shard], "merged with a failed write's higher ask")
	assert.Equal(t, pos(t, "9"), got[b.Shard], "two asks before a write")
}
