package checkpointer

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/connect-kinesis/connect-kinesis/internal/consumer"
	"github.com/connect-kinesis/connect-kinesis/internal/testenv"
)

// TestIntegrationGroupStreamsCluster: the group's streams live on several
// Cluster slots (one per stream); GroupStreams scans every master and
// finds them all, and none of a group named "<group>:x".
func TestIntegrationGroupStreamsCluster(t *testing.T) {
	t.Parallel()
	cl := testenv.NewRedisCluster(t)
	b := backend{url: cl.URL(), kind: KindCluster}
	ctx := t.Context()
	c := newTestCheckpointer(t, b, "billing")
	other := newTestCheckpointer(t, b, "billing:eu")
	var want []string
	for _, name := range []string{"a", "b", "c", "d", "e", "f"} {
		s := c.Stream(arnOf(name))
		_, err := s.Join(ctx)
		require.NoError(t, err)
		tk, err := s.Acquire(ctx, "shardId-0", "x")
		require.NoError(t, err)
		require.NoError(t, s.Commit(ctx, tk.Lease, consumer.Position{Sequence: "1"}))
		want = append(want, arnOf(name))
	}
	_, err := other.Stream(arnOf("z")).Join(ctx)
	require.NoError(t, err)
	slots := map[int64]bool{}
	for _, id := range want {
		slot, err := cl.Client().ClusterKeySlot(ctx, c.Stream(id).Keys().Checkpoints).Result()
		require.NoError(t, err)
		slots[slot] = true
	}
	require.Greater(t, len(slots), 1, "the streams' keys are on several slots")
	got, err := c.GroupStreams(ctx)
	require.NoError(t, err)
	assert.Equal(t, want, got)
}
