package checkpointer

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/connect-kinesis/connect-kinesis/internal/testenv"
)

// Guards the instance claim under a Redis user confined to one group: the
// claim's hash <prefix>:{<group>}:instances is outside the stream keys'
// pattern ~<prefix>:{<group>:*, which docs/deploy.md gave as enough for an
// input of fixed stream names, so such an input failed to connect with a
// refused script and no word of the pattern to add. Under that pattern
// alone the claim must fail naming ~<prefix>:{<group>}:*; with it, the
// claim runs and Redis refuses nothing.
func TestIntegrationSingleGroupACLCoversTheInstanceClaim(t *testing.T) {
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

	keys("~kinesis:{orders:*")
	_, err := connect().ClaimInstance(ctx, "a")
	require.ErrorIs(t, err, ErrNoPermission, "the instances hash is outside ~kinesis:{orders:*")
	assert.Contains(t, err.Error(), "~kinesis:{orders}:*", "the error names the key pattern to add")

	keys("~kinesis:{orders:*", "~kinesis:{orders}:*")
	claim, err := connect().ClaimInstance(ctx, "a")
	require.NoError(t, err)
	require.NoError(t, claim.Release(ctx))
	assertNoACLDenials(t, r)
}
