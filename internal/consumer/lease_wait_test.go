package consumer

import (
	"bytes"
	"context"
	"log/slog"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redpanda-data/benthos/v4/public/service"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// pastDeadlineReader is a reader of shard whose lease's local deadline has
// passed, registered with a coordinator over st that runs no loop.
func pastDeadlineReader(t *testing.T, st Store, shard string) (*coordinator, *shardReader) {
	t.Helper()
	co := balancingCoordinator(st, "me", []string{shard})
	co.runCtx = t.Context()
	l := Lease{Shard: shard, Owner: "me", Token: 1, ExpiresAt: time.Now().Add(time.Minute), Deadline: time.Now().Add(-time.Second)}
	r := newShardReader(co, co.listed[shard], l, startSpec{})
	co.readers[shard] = r
	return co, r
}

// waiters starts n goroutines waiting in awaitLease, as the fetcher and
// every lane of a reader with shard_parallelism n do, and counts those that
// came back confirmed.
func waiters(t *testing.T, r *shardReader, n int) *atomic.Int64 {
	t.Helper()
	var back atomic.Int64
	ctx, cancel := context.WithCancel(t.Context())
	t.Cleanup(cancel)
	for range n {
		go func() {
			if r.awaitLease(ctx) {
				back.Add(1)
			}
		}()
	}
	// Give every waiter time to block on the renewal signal.
	time.Sleep(100 * time.Millisecond)
	require.Zero(t, back.Load(), "a waiter went on past the lease's deadline")
	return &back
}

// One renewal confirms the lease for the whole reader: the fetcher and
// every lane go on, not one of them per renewal.
// They say so once, not once each.
func TestOneRenewalWakesEveryLaneWaitingForTheLease(t *testing.T) {
	t.Parallel()
	_, r := pastDeadlineReader(t, newFakeStore(time.Minute), "shardId-000000000000")
	var logs syncBuffer
	r.log = service.NewLoggerFromSlog(slog.New(slog.NewTextHandler(&logs, nil)))
	back := waiters(t, r, 8)
	l := *r.lease.Load()
	l.Deadline = time.Now().Add(time.Minute)
	r.leaseRenewed(l)
	assert.Eventually(t, func() bool { return back.Load() == 8 }, 2*time.Second, 10*time.Millisecond,
		"waiters back after one renewal")
	assert.EqualValues(t, 8, back.Load())
	assert.Equal(t, 1, strings.Count(logs.String(), "not reading until a renewal confirms the lease"), logs.String())
	assert.Equal(t, 1, strings.Count(logs.String(), "reading the shard again"), logs.String())
}

// syncBuffer is a bytes.Buffer safe for concurrent use.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

func (s *syncBuffer) count(sub string) int { return strings.Count(s.String(), sub) }

// A re-seed that restores the lease confirms it like a renewal: the
// waiting lanes go on at once rather than at the next renewal.
func TestReseedWakesEveryLaneWaitingForTheLease(t *testing.T) {
	t.Parallel()
	co, r := pastDeadlineReader(t, newFakeStore(time.Minute), "shardId-000000000000")
	back := waiters(t, r, 8)
	co.reseed(t.Context())
	assert.Eventually(t, func() bool { return back.Load() == 8 }, 2*time.Second, 10*time.Millisecond,
		"waiters back after the re-seed")
	assert.EqualValues(t, 8, back.Load())
}
