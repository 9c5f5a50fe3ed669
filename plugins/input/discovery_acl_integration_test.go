package input

import (
	"fmt"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/connect-kinesis/connect-kinesis/internal/testenv"
)

// Guards the defect where an input whose `streams` has a pattern
// connected under a Redis user confined to one group's stream keys
// (~<prefix>:{<group>:*, the rule docs/deploy.md gave), and then had
// every discovery round refused while nothing was read. The connection
// fails instead, naming the key pattern to add; with it, it connects.
func TestIntegrationConnectChecksTheDiscoveryHashPermission(t *testing.T) {
	t.Parallel()
	r := testenv.NewRedis(t, testenv.RedisOptions{ShippedACL: true})
	admin := r.Client()
	defer admin.Close()
	ctx := t.Context()
	require.NoError(t, admin.Do(ctx, "ACL", "SETUSER", testenv.ACLInput, "resetkeys", "~kinesis:{g:*").Err())
	yaml := fmt.Sprintf(`
streams: [ "orders-*" ]
region: us-east-1
endpoint: http://127.0.0.1:1
credentials: { id: a, secret: b }
checkpoint: { redis: { url: %q }, group: g }
`, r.URLAs(testenv.ACLInput))

	err := connectInput(t, newInputFromYAML(t, yaml))
	require.Error(t, err, "an input with a pattern may not connect without the discovery hash")
	assert.Contains(t, err.Error(), "NOPERM")
	assert.Contains(t, err.Error(), "~kinesis:{g}:*", "the error names the key pattern to add")

	require.NoError(t, admin.Do(ctx, "ACL", "SETUSER", testenv.ACLInput, "~kinesis:{g}:*").Err())
	require.NoError(t, connectInput(t, newInputFromYAML(t, yaml)))
}
