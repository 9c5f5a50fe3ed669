package chaos

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/connect-kinesis/connect-kinesis/internal/consumer"
)

// The clear of a stream found deleted and created again moves its
// checkpoints back by design, even checkpoints of the new stream that a
// reader started on the deleted one wrote before the clear (seed 12 with
// efo); the check starts afresh there. A checkpoint that moves back
// without such a clear is still a regression.
func TestIntegrationTheCheckpointCheckTellsARecreatedStreamsClearFromARegression(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	red, st := joinedStore(t)
	client := red.Client()
	t.Cleanup(func() { _ = client.Close() })
	deleted := time.Now().Add(-time.Minute).Truncate(time.Millisecond)
	_, err := st.StreamCreated(ctx, deleted, deleted)
	require.NoError(t, err)
	commit := func(seq string) {
		t.Helper()
		take, err := st.Acquire(ctx, "shard-1", "vm-4242-a1b2c3")
		require.NoError(t, err)
		require.NoError(t, st.Commit(ctx, take.Lease, consumer.Position{Sequence: seq}))
		require.NoError(t, st.Release(ctx, take.Lease))
	}

	s := &soak{runner: &runner{logf: t.Logf}, start: time.Now(), streams: []*soakStream{{label: "soak-s", store: st}}}
	m := &monitor{s: s, cps: map[string]consumer.Position{}, created: map[string]time.Time{}}
	commit("2000") // read by name from the new stream before the clear
	m.checkpoints(ctx)

	cleared, err := st.StreamCreated(ctx, deleted, time.Now())
	require.NoError(t, err)
	require.True(t, cleared)
	commit("1000") // read again from the start
	m.checkpoints(ctx)
	assert.Zero(t, m.v.Regressions, "the clear of a recreated stream was judged a regression: %v", m.v.Problems)

	require.NoError(t, client.HSet(context.Background(), st.Keys().Checkpoints, "shard-1", consumer.Position{Sequence: "500"}.String()).Err())
	m.checkpoints(ctx)
	assert.Equal(t, 1, m.v.Regressions, "a checkpoint moved back without a clear")
}
