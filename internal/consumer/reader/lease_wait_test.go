package reader

import (
	"context"
	"log/slog"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/connect-kinesis/connect-kinesis/internal/consumer/consumertest"
	"github.com/redpanda-data/benthos/v4/public/service"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// waiters starts n goroutines waiting in awaitLease, as the fetcher and
// every lane of a reader with shard_parallelism n do, and counts those that
// came back confirmed.
func waiters(t *testing.T, r *Reader, n int) *atomic.Int64 {
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
	r := pastDeadlineReader(t, consumertest.NewStore(time.Minute), "shardId-000000000000")
	var logs consumertest.SyncBuffer
	r.log = service.NewLoggerFromSlog(slog.New(slog.NewTextHandler(&logs, nil)))
	back := waiters(t, r, 8)
	l := r.Lease()
	l.Deadline = time.Now().Add(time.Minute)
	r.LeaseRenewed(l)
	assert.Eventually(t, func() bool { return back.Load() == 8 }, 2*time.Second, 10*time.Millisecond,
		"waiters back after one renewal")
	assert.EqualValues(t, 8, back.Load())
	assert.Equal(t, 1, strings.Count(logs.String(), "not reading until a renewal confirms the lease"), logs.String())
	assert.Equal(t, 1, strings.Count(logs.String(), "reading the shard again"), logs.String())
}
