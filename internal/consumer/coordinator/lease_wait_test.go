package coordinator

import (
	"testing"
	"time"

	"github.com/connect-kinesis/connect-kinesis/internal/consumer"
	"github.com/connect-kinesis/connect-kinesis/internal/consumer/consumertest"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// pastDeadlineReader is a reader of shard whose lease's local deadline has
// passed, registered with a coordinator over st that runs no loop.
func pastDeadlineReader(t *testing.T, st consumer.Store, shard string) (*coordinator, *fakeReader) {
	t.Helper()
	co := balancingCoordinator(st, "me", []string{shard})
	co.runCtx = t.Context()
	l := consumer.Lease{Shard: shard, Owner: "me", Token: 1, ExpiresAt: time.Now().Add(time.Minute), Deadline: time.Now().Add(-time.Second)}
	r := newFakeReader(shard, l)
	co.readers[shard] = r
	return co, r
}

// A re-seed that restores the lease confirms it like a renewal: the
// reader is handed the restored lease at once, with its deadline ahead, so
// its waiting lanes go on rather than at the next renewal (one renewal
// wakes them all: TestOneRenewalWakesEveryLaneWaitingForTheLease). A lease
// whose local deadline had passed before the store forgot is restored but
// confirmed only by a renewal a lease period later, so that a newer owner
// can claim it back first (TestReseededLeasePastItsDeadlineWaitsForANewerOwner).
func TestReseedWakesEveryLaneWaitingForTheLease(t *testing.T) {
	t.Parallel()
	st := consumertest.NewStore(time.Minute)
	co, r := pastDeadlineReader(t, st, "shardId-000000000000")
	live := consumer.Lease{Shard: "shardId-000000000001", Owner: "me", Token: 2, ExpiresAt: time.Now().Add(time.Minute), Deadline: time.Now().Add(time.Minute)}
	waiting := newFakeReader(live.Shard, live)
	co.readers[live.Shard] = waiting
	require.False(t, r.LeaseLive())
	co.reseed(t.Context())
	assert.EqualValues(t, 1, waiting.renewals.Load(), "the re-seed confirms a lease whose deadline was ahead")
	assert.Zero(t, r.renewals.Load(), "but not one whose deadline had passed")
	co.renew(t.Context(), false)
	assert.Zero(t, r.renewals.Load(), "nor does a renewal within the lease period after it")
	time.Sleep(co.c.cfg.LeasePeriod)
	co.renew(t.Context(), false)
	assert.EqualValues(t, 1, r.renewals.Load(), "a renewal a lease period later confirms it")
	assert.True(t, r.LeaseLive(), "with its deadline ahead")
}
