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
// wakes them all: TestOneRenewalWakesEveryLaneWaitingForTheLease).
func TestReseedWakesEveryLaneWaitingForTheLease(t *testing.T) {
	t.Parallel()
	co, r := pastDeadlineReader(t, consumertest.NewStore(time.Minute), "shardId-000000000000")
	require.False(t, r.LeaseLive())
	co.reseed(t.Context())
	assert.EqualValues(t, 1, r.renewals.Load(), "the re-seed confirms the lease to its reader")
	assert.True(t, r.LeaseLive(), "with its deadline ahead")
}
