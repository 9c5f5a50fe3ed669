package checkpointer

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// A pruned shard leaves the reopened list: nobody reads it again, and left
// there it stopped, at every later re-seed whose group record lost, the
// readers of its children (coordinator.stopChildrenOfReopened), which the
// gate counts as ready since the stream no longer lists their parent.
//
// Guards: prune.lua kept a pruned shard in the group record's reopened
// list.
func TestAPrunedShardLeavesTheReopenedList(t *testing.T) {
	t.Parallel()
	srv := newMiniServer(t)
	srv.reset(nil)
	cfg := DefaultConfig()
	cfg.RedisURL, cfg.Group = "redis://sim", simGroup
	cp := NewFromClient(srv.client(&simHook{infoFunc: srv.info()}), cfg, nil, nil)
	st := cp.Stream(simStream)
	_, err := st.Join(t.Context())
	require.NoError(t, err)
	require.NotEmpty(t, srv.hget(st.keys.Epoch, "id"), "the group record was not written")
	srv.m.HSet(st.keys.Epoch, reopenedField, " p q ")
	pruned, err := st.Prune(t.Context(), []string{"p"})
	require.NoError(t, err)
	require.Equal(t, []string{"p"}, pruned)
	assert.Equal(t, " q ", srv.hget(st.keys.Epoch, reopenedField), "a pruned shard stayed in the reopened list")
}
