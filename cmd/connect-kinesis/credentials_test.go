package main

import (
	"fmt"
	"net/http"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/connect-kinesis/connect-kinesis/internal/faultproxy"
	"github.com/connect-kinesis/connect-kinesis/internal/testenv"
)

// TestIntegrationWrongCredentials: the emulators accept any keys, so the
// proxy answers every call the way AWS answers unknown keys
// (UnrecognizedClientException). Both plugins must say so once, clearly, and
// point at the credentials fields, rather than retry as if it were a fault.
func TestIntegrationWrongCredentials(t *testing.T) {
	t.Parallel()
	k := testenv.SharedKinesisMock(t)
	r := testenv.NewRedis(t)
	k.MustCreateStream(t, "orders", 1)
	p, err := faultproxy.Start(k.Endpoint, 1)
	require.NoError(t, err)
	t.Cleanup(func() { _ = p.Close() })
	deny := faultproxy.Rule{Hook: func(string, []byte) *faultproxy.Response {
		return &faultproxy.Response{Status: http.StatusBadRequest, Body: []byte(
			`{"__type":"UnrecognizedClientException","message":"The security token included in the request is invalid."}`)}
	}}
	for _, op := range []string{"DescribeStreamSummary", "ListShards", "GetShardIterator", "GetRecords", "PutRecords"} {
		p.Set(op, deny)
	}

	t.Run("output", func(t *testing.T) {
		log := runUntilLogged(t, badOutputConfig(map[string]string{"endpoint": p.URL}), "UnrecognizedClientException")
		assert.Contains(t, log, "credentials", "the error points at the credentials fields:\n%s", log)
		assert.NotContains(t, log, testenv.SecretKey)
	})
	t.Run("input", func(t *testing.T) {
		conf := badInputConfig(map[string]string{
			"endpoint":   p.URL,
			"checkpoint": fmt.Sprintf("{ redis: { url: '%s' }, group: g }", r.URL()),
		})
		log := runUntilLogged(t, conf, "UnrecognizedClientException")
		assert.Contains(t, log, "credentials", "the error points at the credentials fields:\n%s", log)
		assert.NotContains(t, log, testenv.SecretKey)
	})
}
