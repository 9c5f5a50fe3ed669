package checkpointer

import (
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/connect-kinesis/connect-kinesis/internal/testenv"
)

// TestIntegrationJoinNamesEveryMissingCommand takes each command the
// input's scripts call away from the shipped input user in turn: Join (the
// input's connection) fails with a PermissionError naming it, and leaves
// no scratch key behind. With all of them granted Join succeeds.
func TestIntegrationJoinNamesEveryMissingCommand(t *testing.T) {
	t.Parallel()
	r := testenv.NewRedis(t, testenv.RedisOptions{ShippedACL: true})
	admin := r.Client()
	defer admin.Close()
	ctx := t.Context()
	cfg := testConfig(backend{url: r.URLAs(testenv.ACLInput), kind: KindSimple}, "orders")
	cfg.LeasePeriod = 30 * time.Second
	c, err := New(ctx, cfg, nil, nil)
	require.NoError(t, err)
	t.Cleanup(func() { _ = c.Close() })

	commands := scriptCommands(inputScripts)
	require.Contains(t, commands, "ZADD")
	for _, command := range commands {
		lower := strings.ToLower(command)
		require.NoError(t, admin.Do(ctx, "ACL", "SETUSER", testenv.ACLInput, "-"+lower).Err())
		_, err := c.Stream(aclStream).Join(ctx)
		require.NoError(t, admin.Do(ctx, "ACL", "SETUSER", testenv.ACLInput, "+"+lower).Err())
		require.ErrorIs(t, err, ErrNoPermission, "without %s", command)
		var pe *PermissionError
		require.ErrorAs(t, err, &pe)
		assert.Equal(t, command, pe.Command, "the refused command is named: %v", err)
		assert.Contains(t, err.Error(), "docs/deploy.md")
		left, err := admin.Keys(ctx, "*permission-check*").Result()
		require.NoError(t, err)
		assert.Empty(t, left, "without %s the check leaves its scratch keys", command)
	}
	_, err = c.Stream(aclStream).Join(ctx)
	require.NoError(t, err)
	left, err := admin.Keys(ctx, "*permission-check*").Result()
	require.NoError(t, err)
	assert.Empty(t, left)
}
