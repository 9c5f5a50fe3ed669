package checkpointer

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/connect-kinesis/connect-kinesis/internal/consumer"
)

// TestIntegrationOperatorWritesArePropagatedWhetherOrNotTheyChangeAnything
// guards the operator's scripts against writing nothing on a retry: a
// reset, a delete or a restore of marks that finds the keys already as it
// leaves them must still propagate a write, or on Redis 7.2 and later (and
// Valkey) the WAIT after it on a new connection covers nothing and the
// command is reported replicated while no replica holds it. The master's
// replication offset shows it on every server version, where
// TestIntegrationOperatorWritesWaitForReplicas on Redis 7.0 cannot.
func TestIntegrationOperatorWritesArePropagatedWhetherOrNotTheyChangeAnything(t *testing.T) {
	t.Parallel()
	master, _ := quietMaster(t, "")
	cfg := DefaultConfig()
	cfg.RedisURL, cfg.Group, cfg.MinReplicasToAck = master.URL(), "operator-propagated", 0
	c, err := New(t.Context(), cfg, nil, nil)
	require.NoError(t, err)
	defer c.Close()
	s := c.Stream("orders")
	ctx := t.Context()
	mc := master.Client()
	defer mc.Close()
	const shard = "shardId-000000000000"

	propagated := func(what string, run func() error) {
		t.Helper()
		before := replOffset(t, mc)
		require.NoError(t, run(), what)
		assert.Greater(t, replOffset(t, mc), before, "%s propagated nothing, so a WAIT on its connection covers nothing", what)
	}
	restore := func() error {
		_, err := s.RestoreDelivered(ctx, map[string]consumer.Position{shard: {Sequence: "40"}})
		return err
	}
	propagated("a restore of marks", restore)
	propagated("a restore of marks already as far", restore)
	reset := func() error { _, err := s.Reset(ctx, nil, nil, nil, true); return err }
	propagated("a reset", reset)
	propagated("a reset of a group already reset", reset)
	del := func() error { _, err := s.Delete(ctx, true); return err }
	propagated("a delete", del)
	propagated("a delete of a group already deleted", del)
}
