package awsconf

import (
	"bytes"
	"encoding/json"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"

	"github.com/redpanda-data/benthos/v4/public/service"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// syncBuffer is a bytes.Buffer for a logger and a test.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// The SDK's own log lines go through the Benthos logger, in its format
// (JSON here) and at the matching level (issue 39 item 5: "SDK 2026/12/02
// ... WARN falling back to IMDSv1: ..." went to stderr past `logger.format:
// json`). An instance metadata service on loopback refuses the IMDSv2
// token, which makes the SDK warn that it falls back to IMDSv1.
func TestSDKLogLinesGoThroughTheBenthosLogger(t *testing.T) {
	isolate(t)
	imds := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method == http.MethodPut {
			w.WriteHeader(http.StatusForbidden)
			return
		}
		w.WriteHeader(http.StatusNotFound)
	}))
	t.Cleanup(imds.Close)
	t.Setenv("AWS_EC2_METADATA_DISABLED", "false")
	t.Setenv("AWS_EC2_METADATA_SERVICE_ENDPOINT", imds.URL)

	var out syncBuffer
	log := service.NewLoggerFromSlog(slog.New(slog.NewJSONHandler(&out, &slog.HandlerOptions{Level: slog.LevelDebug})))
	s := Settings{Region: "us-east-1", Endpoint: "http://127.0.0.1:1"}
	cfg, err := s.LoadLogged(t.Context(), log)
	require.NoError(t, err)
	_, err = cfg.Credentials.Retrieve(t.Context())
	require.Error(t, err, "the metadata service has no role")

	var found bool
	for _, line := range strings.Split(strings.TrimSpace(out.String()), "\n") {
		var rec map[string]any
		require.NoError(t, json.Unmarshal([]byte(line), &rec), "every line is JSON: %q", line)
		if msg, _ := rec["msg"].(string); strings.Contains(msg, "falling back to IMDSv1") {
			found = true
			assert.Equal(t, "WARN", rec["level"])
			assert.Equal(t, "aws-sdk", rec["source"])
		}
	}
	assert.True(t, found, "the SDK's warning is a line of the Benthos log:\n%s", out.String())
}
