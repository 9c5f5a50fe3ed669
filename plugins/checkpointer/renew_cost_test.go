package checkpointer

import (
	"fmt"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/connect-kinesis/connect-kinesis/internal/consumer"
	"github.com/connect-kinesis/connect-kinesis/internal/testenv"
)

// TestIntegrationRenewReadsEachLeaseOnce guards the renewal script's
// command count per lease: an idle group's Redis cost is mostly renewals
// (every lease.period / 3), and a script that checked each lease with
// HEXISTS before reading it with HGET cost three commands per lease per
// renewal instead of two (one read, one write).
func TestIntegrationRenewReadsEachLeaseOnce(t *testing.T) {
	const shards = 50
	r := testenv.NewRedis(t)
	admin := r.Client()
	defer admin.Close()
	ck, _ := countedCheckpointer(t, r.URL(), "renewcost")
	s := ck.Stream("arn:aws:kinesis:us-east-1:000000000000:stream/renewcost")
	ctx := t.Context()

	var owned []consumer.Lease
	for i := 0; i < shards; i++ {
		l, err := leaseOf(s.Acquire(ctx, fmt.Sprintf("shardId-%012d", i), "instance-0"))
		require.NoError(t, err)
		owned = append(owned, l)
	}
	// Warm up: the script's first call loads it.
	owned, lost, err := s.RenewAll(ctx, "instance-0", owned)
	require.NoError(t, err)
	require.Empty(t, lost)

	before := serverCalls(t, admin)
	owned, lost, err = s.RenewAll(ctx, "instance-0", owned)
	require.NoError(t, err)
	require.Empty(t, lost)
	require.Len(t, owned, shards)
	// The INFO call that reads the counter is itself counted once.
	commands := serverCalls(t, admin) - before - 1
	perLease := float64(commands) / shards
	t.Logf("one renewal of %d leases: %d server commands (%.2f per lease)", shards, commands, perLease)
	// Two per lease (HGET, HSET) plus the script's fixed calls (EVALSHA,
	// the group check, TIME).
	assert.LessOrEqual(t, commands, int64(2*shards+6), "a renewal costs at most a read and a write per lease")
}
