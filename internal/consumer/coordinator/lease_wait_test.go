package coordinator

import (
	"context"
	"log/slog"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/connect-kinesis/connect-kinesis/internal/consumer"
	"github.com/connect-kinesis/connect-kinesis/internal/consumer/consumertest"
	"github.com/connect-kinesis/connect-kinesis/internal/consumer/reader"
	"github.com/connect-kinesis/connect-kinesis/internal/consumer/source"
	"github.com/redpanda-data/benthos/v4/public/service"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// pastDeadlineReader is a reader of shard whose lease's local deadline has
// passed, registered with a coordinator over st that runs no loop.
func pastDeadlineReader(t *testing.T, st consumer.Store, shard string) (*coordinator, *reader.Reader) {
	t.Helper()
	co := balancingCoordinator(st, "me", []string{shard})
	co.runCtx = t.Context()
	l := consumer.Lease{Shard: shard, Owner: "me", Token: 1, ExpiresAt: time.Now().Add(time.Minute), Deadline: time.Now().Add(-time.Second)}
	r := newShardReader(co, co.listed[shard], l, source.Start{})
	co.readers[shard] = r
	return co, r
}

// waiters starts n goroutines waiting in awaitLease, as the fetcher and
// every lane of a reader with shard_parallelism n do, and counts those that
// came back confirmed.
func waiters(t *testing.T, r *reader.Reader, n int) *atomic.Int64 {
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
	_, r := pastDeadlineReader(t, consumertest.NewStore(time.Minute), "shardId-000000000000")
	var logs consumertest.SyncBuffer
	r.Log = service.NewLoggerFromSlog(slog.New(slog.NewTextHandler(&logs, nil)))
	back := waiters(t, r, 8)
	l := *r.Lease.Load()
	l.Deadline = time.Now().Add(time.Minute)
	r.LeaseRenewed(l)
	assert.Eventually(t, func() bool { return back.Load() == 8 }, 2*time.Second, 10*time.Millisecond,
		"waiters back after one renewal")
	assert.EqualValues(t, 8, back.Load())
	assert.Equal(t, 1, strings.Count(logs.String(), "not reading until a renewal confirms the lease"), logs.String())
	assert.Equal(t, 1, strings.Count(logs.String(), "reading the shard again"), logs.String())
}

// A re-seed that restores the lease confirms it like a renewal: the
// waiting lanes go on at once rather than at the next renewal.
func TestReseedWakesEveryLaneWaitingForTheLease(t *testing.T) {
	t.Parallel()
	co, r := pastDeadlineReader(t, consumertest.NewStore(time.Minute), "shardId-000000000000")
	back := waiters(t, r, 8)
	co.reseed(t.Context())
	assert.Eventually(t, func() bool { return back.Load() == 8 }, 2*time.Second, 10*time.Millisecond,
		"waiters back after the re-seed")
	assert.EqualValues(t, 8, back.Load())
}
