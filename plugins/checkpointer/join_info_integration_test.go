package checkpointer

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/connect-kinesis/connect-kinesis/internal/consumer"
	"github.com/connect-kinesis/connect-kinesis/internal/testenv"
)

// Guards the defect where Join sent INFO server for every group record
// without a re-seed mark, however old, so an input user without INFO (one
// server, min_replicas_to_ack 0: docs/deploy.md's rules need none there)
// could not join an hour-old group. An old record needs no uptime: Join
// sends no INFO. A young one without INFO is joined too, waiting as if
// Redis had just restarted.
func TestIntegrationJoinWithoutINFOPermission(t *testing.T) {
	t.Parallel()
	r := testenv.NewRedis(t, testenv.RedisOptions{ShippedACL: true})
	admin := r.Client()
	defer admin.Close()
	ctx := t.Context()
	// The group record exists, created an hour ago.
	old := aclStore(t, r, testenv.ACLInput, "orders")
	_, err := old.Join(ctx)
	require.NoError(t, err)
	require.NoError(t, admin.HSet(ctx, old.keys.Epoch, createdField, time.Now().Add(-time.Hour).UnixMilli()).Err())
	require.NoError(t, admin.Do(ctx, "ACL", "LOG", "RESET").Err())
	require.NoError(t, admin.Do(ctx, "ACL", "SETUSER", testenv.ACLInput, "-info").Err())

	t.Run("an hour-old group", func(t *testing.T) {
		wait, err := aclStore(t, r, testenv.ACLInput, "orders").Join(ctx)
		require.NoError(t, err, "an input user without INFO joins an hour-old group")
		assert.Zero(t, wait)
		denied, err := r.ACLDenials(ctx)
		require.NoError(t, err)
		assert.Empty(t, denied, "no INFO is sent to join an old group")
	})
	t.Run("a new group", func(t *testing.T) {
		s := aclStore(t, r, testenv.ACLInput, "fresh")
		began := time.Now()
		wait, err := s.Join(ctx)
		require.NoError(t, err, "an input user without INFO joins a new group")
		bound := consumer.RestartWait(s.c.cfg.LeasePeriod) + time.Second
		assert.Greater(t, wait, bound-time.Since(began)-time.Second, "without the uptime, Join waits as if Redis had just restarted")
		assert.LessOrEqual(t, wait, bound)
	})
}
