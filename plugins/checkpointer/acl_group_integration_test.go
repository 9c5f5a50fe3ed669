package checkpointer

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/connect-kinesis/connect-kinesis/internal/testenv"
)

// Guards the defect where docs/deploy.md's rule to confine the input's
// user to one group, ~<prefix>:{<group>:*, did not cover the group's
// discovery hash <prefix>:{<group>}:streams: every discovery round was
// refused and the streams of a pattern were never read, while the
// connection check passed. Under that rule alone the discovery is refused
// and CheckDiscoveryPermissions names the key pattern to add; with the
// rules deploy.md now gives, the discovery runs and Redis refuses nothing.
func TestIntegrationSingleGroupACLCoversTheDiscoveryHash(t *testing.T) {
	t.Parallel()
	r := testenv.NewRedis(t, testenv.RedisOptions{ShippedACL: true})
	admin := r.Client()
	defer admin.Close()
	ctx := t.Context()
	keys := func(patterns ...string) {
		t.Helper()
		args := []any{"ACL", "SETUSER", testenv.ACLInput, "resetkeys"}
		for _, p := range patterns {
			args = append(args, p)
		}
		require.NoError(t, admin.Do(ctx, args...).Err())
		require.NoError(t, admin.Do(ctx, "ACL", "LOG", "RESET").Err())
	}
	connect := func() *Checkpointer {
		t.Helper()
		cfg := testConfig(backend{url: r.URLAs(testenv.ACLInput), kind: KindSimple}, "orders")
		cfg.LeasePeriod = 30 * time.Second
		c, err := New(ctx, cfg, nil, nil)
		require.NoError(t, err)
		t.Cleanup(func() { _ = c.Close() })
		return c
	}

	// The stream keys' pattern alone: a stream's store works, the
	// discovery does not, and the check says which pattern to add.
	keys("~kinesis:{orders:*")
	c := connect()
	_, err := c.Stream(aclStream).Join(ctx)
	require.NoError(t, err)
	_, err = c.ClaimDiscovery(ctx, "a", 5*time.Second)
	require.ErrorIs(t, err, ErrNoPermission, "the discovery hash is outside ~kinesis:{orders:*")
	err = c.CheckDiscoveryPermissions(ctx)
	require.ErrorIs(t, err, ErrNoPermission)
	assert.Contains(t, err.Error(), "~kinesis:{orders}:*", "the error names the key pattern to add")
	left, err := admin.Keys(ctx, "*permission-check*").Result()
	require.NoError(t, err)
	assert.Empty(t, left)

	// deploy.md's rules for one group.
	keys("~kinesis:{orders:*", "~kinesis:{orders}:*")
	c = connect()
	require.NoError(t, c.CheckDiscoveryPermissions(ctx))
	claim, err := c.ClaimDiscovery(ctx, "a", 5*time.Second)
	require.NoError(t, err)
	require.True(t, claim.Granted)
	published, _, err := c.PublishDiscovery(ctx, "a", claim.Token, nil, time.Hour)
	require.NoError(t, err)
	assert.True(t, published)
	_, err = c.ReadDiscovery(ctx)
	require.NoError(t, err)
	_, err = c.Stream(aclStream).Join(ctx)
	require.NoError(t, err)
	assertNoACLDenials(t, r)
	// Another group's keys stay out of reach.
	require.NoError(t, admin.HSet(ctx, "kinesis:{other}:streams", "f", "v").Err())
	cfg := testConfig(backend{url: r.URLAs(testenv.ACLInput), kind: KindSimple}, "other")
	other, err := New(ctx, cfg, nil, nil)
	require.NoError(t, err)
	defer other.Close()
	assert.ErrorIs(t, other.CheckDiscoveryPermissions(ctx), ErrNoPermission)
}

// The key pattern the discovery check names escapes what a Redis key
// pattern reads as a glob, as docs/deploy.md asks of a prefix or group.
func TestACLGlobEscape(t *testing.T) {
	t.Parallel()
	assert.Equal(t, `kin\*:{g\?\[1\]\\}:*`, discoveryKeyPattern("kin*", `g?[1]\`))
}
