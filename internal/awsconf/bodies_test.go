package awsconf

import (
	"testing"
	"time"

	awshttp "github.com/aws/aws-sdk-go-v2/aws/transport/http"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestKinesisClientKeepsTheDefaultsModeTimeouts guards the request-body
// wrapper hiding the SDK's own client type from the Kinesis client: the
// client then skipped the connect and TLS handshake timeouts that
// AWS_DEFAULTS_MODE (or defaults_mode in the shared config) sets.
func TestKinesisClientKeepsTheDefaultsModeTimeouts(t *testing.T) {
	isolate(t)
	t.Setenv("AWS_DEFAULTS_MODE", "in-region")
	s := Settings{Region: "us-east-1", Endpoint: "http://127.0.0.1:1", ID: "id", Secret: "secret"}
	cfg, err := s.Load(t.Context())
	require.NoError(t, err)
	hc := s.KinesisClient(cfg).Options().HTTPClient
	wrapped, ok := hc.(readOnlyBodies)
	require.True(t, ok, "the Kinesis client's requests go through readOnlyBodies, got %T", hc)
	b, ok := wrapped.client.(*awshttp.BuildableClient)
	require.True(t, ok, "under the wrapper is the SDK's client, got %T", wrapped.client)
	assert.Equal(t, 1100*time.Millisecond, b.GetDialer().Timeout, "in-region's connect timeout")
	assert.Equal(t, 1100*time.Millisecond, b.GetTransport().TLSHandshakeTimeout, "in-region's TLS handshake timeout")
	assert.Equal(t, idleConnTimeout, b.GetTransport().IdleConnTimeout, "the project's own transport settings stay")
}
