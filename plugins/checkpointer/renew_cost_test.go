package checkpointer

import (
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/connect-kinesis/connect-kinesis/internal/consumer"
	"github.com/connect-kinesis/connect-kinesis/internal/testenv"
)

// TestIntegrationRenewalAndProgressCostAFewCommandsHoweverManyLeases
// guards the idle group's Redis cost, which is mostly renewals and the
// published progress (each every lease.period / 3). Each reads the leases
// with HMGET and writes with one HSET, in chunks of 1,000 fields, so a
// call costs a handful of commands however many leases it covers; a
// command per lease (HGET, HSET) cost an instance of 500 shards 2,000
// commands a tick. The lease count spans three chunks, so a chunk left
// out (or Lua's unpack limit) would show as a lease not renewed or a
// shard without progress.
func TestIntegrationRenewalAndProgressCostAFewCommandsHoweverManyLeases(t *testing.T) {
	t.Parallel()
	const shards = 2500
	r := testenv.NewRedis(t)
	admin := r.Client()
	defer admin.Close()
	ck, _ := countedCheckpointer(t, r.URL(), "renewcost")
	s := ck.Stream("arn:aws:kinesis:us-east-1:000000000000:stream/renewcost")
	ctx := t.Context()

	ids := make([]string, shards)
	for i := range ids {
		ids[i] = fmt.Sprintf("shardId-%012d", i)
	}
	var owned []consumer.Lease
	for _, res := range s.AcquireMany(ctx, ids, "instance-0") {
		require.NoError(t, res.Err)
		owned = append(owned, res.Take.Lease)
	}
	require.Len(t, owned, shards)
	// Another owner's lease among them is reported lost, not renewed.
	stolen := owned[1500]
	require.NoError(t, s.Release(ctx, stolen))
	other, err := leaseOf(s.Acquire(ctx, stolen.Shard, "instance-1"))
	require.NoError(t, err)

	// Warm up: the script's first call loads it.
	owned, lost, err := s.RenewAll(ctx, "instance-0", owned)
	require.NoError(t, err)
	require.Equal(t, []string{stolen.Shard}, lost)
	first, err := s.Leases(ctx)
	require.NoError(t, err)
	time.Sleep(5 * time.Millisecond) // the next expiry is later than the first's
	before := serverCalls(t, admin)
	renewed, lost, err := s.RenewAll(ctx, "instance-0", owned)
	require.NoError(t, err)
	// The INFO call that reads the counter is itself counted once.
	commands := serverCalls(t, admin) - before - 1
	require.Empty(t, lost)
	require.Len(t, renewed, shards-1)
	t.Logf("one renewal of %d leases: %d server commands", len(renewed), commands)
	assert.LessOrEqual(t, commands, int64(12), "a renewal costs a handful of commands, not one per lease")

	states, err := s.Leases(ctx)
	require.NoError(t, err)
	for i, l := range renewed {
		st := states[l.Shard]
		require.Equal(t, "instance-0", st.Owner, "lease %d (%s)", i, l.Shard)
		require.True(t, st.ExpiresAt.After(first[l.Shard].ExpiresAt), "lease %d (%s) was not renewed: expires %v, as before", i, l.Shard, st.ExpiresAt)
	}
	assert.Equal(t, "instance-1", states[stolen.Shard].Owner)
	assert.Equal(t, other.Token, states[stolen.Shard].Token, "the other owner's lease is left as it was")

	ps := map[string]consumer.Progress{}
	for i, id := range ids {
		ps[id] = consumer.Progress{LagMillis: int64(i), BytesPerSecond: int64(10 * i)}
	}
	require.NoError(t, s.PublishProgress(ctx, "instance-0", ps)) // loads the script
	before = serverCalls(t, admin)
	require.NoError(t, s.PublishProgress(ctx, "instance-0", ps))
	commands = serverCalls(t, admin) - before - 1
	t.Logf("one publish of %d shards' progress: %d server commands", shards, commands)
	assert.LessOrEqual(t, commands, int64(10), "publishing progress costs a handful of commands, not one per shard")
	got, err := s.Progress(ctx)
	require.NoError(t, err)
	assert.Len(t, got, shards-1, "every shard of instance-0 has its progress, the other owner's none")
	assert.NotContains(t, got, stolen.Shard)
	last := ids[shards-1]
	assert.Equal(t, int64(shards-1), got[last].LagMillis, "the last chunk's progress is written")
}
