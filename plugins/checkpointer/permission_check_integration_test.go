package checkpointer

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
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

// TestIntegrationJoinNamesMissingConnectionCommands takes away, in turn,
// each command the input sends outside its scripts: INFO and WAIT when
// commits wait for replicas (min_replicas_to_ack 1 here), CLUSTER|SLOTS
// and COMMAND on a cluster. Join names the one missing; with all of them
// Join succeeds.
func TestIntegrationJoinNamesMissingConnectionCommands(t *testing.T) {
	t.Parallel()
	type target struct {
		url, kind string
		admins    []interface {
			Do(ctx context.Context, args ...any) *redis.Cmd
		}
		commands []string
	}
	single := testenv.NewRedis(t, testenv.RedisOptions{ShippedACL: true})
	cluster := testenv.NewRedisCluster(t, testenv.RedisOptions{ShippedACL: true})
	sa := single.Client()
	defer sa.Close()
	targets := map[string]target{
		"single with replicas to wait for": {url: single.URLAs(testenv.ACLInput), kind: KindSimple, admins: []interface {
			Do(ctx context.Context, args ...any) *redis.Cmd
		}{sa}, commands: []string{"INFO", "WAIT"}},
	}
	var clusterAdmins []interface {
		Do(ctx context.Context, args ...any) *redis.Cmd
	}
	for _, addr := range cluster.Addrs() {
		c := redis.NewClient(&redis.Options{Addr: addr})
		defer c.Close()
		clusterAdmins = append(clusterAdmins, c)
	}
	targets["cluster"] = target{url: cluster.URLAs(testenv.ACLInput), kind: KindCluster, admins: clusterAdmins,
		commands: []string{"INFO", "WAIT", "CLUSTER|SLOTS", "COMMAND"}}

	for name, tg := range targets {
		t.Run(name, func(t *testing.T) {
			ctx := t.Context()
			cfg := testConfig(backend{url: tg.url, kind: tg.kind}, "orders")
			cfg.LeasePeriod = 30 * time.Second
			if tg.kind == KindSimple {
				cfg.MinReplicasToAck = 1
			}
			setAll := func(rule string) {
				for _, a := range tg.admins {
					require.NoError(t, a.Do(ctx, "ACL", "SETUSER", testenv.ACLInput, rule).Err())
				}
			}
			for _, command := range tg.commands {
				// A fresh client each time: a cluster client caches the
				// slots and the command table it read.
				c, err := New(ctx, cfg, nil, nil)
				require.NoError(t, err)
				setAll("-" + strings.ToLower(command))
				_, err = c.Stream(aclStream).Join(ctx)
				setAll("+" + strings.ToLower(command))
				_ = c.Close()
				require.ErrorIs(t, err, ErrNoPermission, "without %s", command)
				var pe *PermissionError
				require.ErrorAs(t, err, &pe)
				assert.Equal(t, command, pe.Command, "the refused command is named: %v", err)
			}
			c, err := New(ctx, cfg, nil, nil)
			require.NoError(t, err)
			defer c.Close()
			_, err = c.Stream(aclStream).Join(ctx)
			require.NoError(t, err)
		})
	}
}

// A command that fails for another reason than the user's permission is
// no refusal: CLUSTER SLOTS on a server without cluster support.
func TestIntegrationProbeTellsNoPermissionFromOtherErrors(t *testing.T) {
	t.Parallel()
	r := testenv.NewRedis(t, testenv.RedisOptions{ShippedACL: true})
	admin := r.Client()
	defer admin.Close()
	opts, err := redis.ParseURL(r.URLAs(testenv.ACLInput))
	require.NoError(t, err)
	c := redis.NewClient(opts)
	defer c.Close()
	c.AddHook(newPermissionHook(nil))
	ctx := t.Context()
	require.ErrorContains(t, c.Do(ctx, "cluster", "slots").Err(), "cluster support disabled")
	refused, err := probeRefused(ctx, c, "cluster", "slots")
	require.NoError(t, err)
	assert.False(t, refused, "cluster support disabled is not a permission error")
	require.NoError(t, admin.Do(ctx, "ACL", "SETUSER", testenv.ACLInput, "-cluster|slots").Err())
	refused, err = probeRefused(ctx, c, "cluster", "slots")
	require.NoError(t, err)
	assert.True(t, refused, "NOPERM is")
}
