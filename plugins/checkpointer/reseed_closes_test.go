package checkpointer

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/connect-kinesis/connect-kinesis/internal/consumer"
)

// Writing back closes the store lacks (consumer's writeBackClosed: a seed
// of closed shards only, on a store that kept the group record) is no
// re-seed of a store that forgot: a shard nobody ever leased, such as a
// child a reshard just made, is taken at once, not a lease period later.
func TestIntegrationWritingBackClosesPausesNoNewShard(t *testing.T) {
	t.Parallel()
	stores, _ := forgetStores(t, 1, 30*time.Second)
	s := stores[0]
	ctx := t.Context()
	_, err := s.Join(ctx)
	require.NoError(t, err)
	mustAcquire(t, s, "shard-0")

	_, err = s.Reseed(ctx, consumer.Seed{Owner: "a", Checkpoints: map[string]consumer.Position{}, Closed: []string{"shard-parent"}})
	require.NoError(t, err)
	closed, err := s.ClosedShards(ctx)
	require.NoError(t, err)
	assert.True(t, closed["shard-parent"], "the close is written back")

	_, err = s.Acquire(ctx, "shard-child", "b")
	assert.NoError(t, err, "a shard never leased is taken at once after a write-back of closes")
}
