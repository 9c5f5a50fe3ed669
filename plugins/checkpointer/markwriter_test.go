package checkpointer

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

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
