package awsconf

import (
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// The client drops an idle connection before a server with a 5 s
// keep-alive (Node's default, kinesalite's) would: otherwise a request can
// go out on a connection at the instant the server closes it, and fail.
func TestClientClosesIdleConnectionsBeforeAFiveSecondKeepAlive(t *testing.T) {
	t.Parallel()
	var (
		mu     sync.Mutex
		closed = map[net.Conn]time.Time{}
	)
	srv := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		_, _ = w.Write([]byte("{}"))
	}))
	// The server itself keeps idle connections far longer.
	srv.Config.IdleTimeout = time.Minute
	srv.Config.ConnState = func(c net.Conn, s http.ConnState) {
		if s == http.StateClosed {
			mu.Lock()
			closed[c] = time.Now()
			mu.Unlock()
		}
	}
	srv.Start()
	t.Cleanup(srv.Close)

	req, err := http.NewRequestWithContext(t.Context(), http.MethodPost, srv.URL, nil)
	require.NoError(t, err)
	resp, err := httpClient().Do(req)
	require.NoError(t, err)
	// Read to the end, so that the connection goes back to the pool.
	_, err = io.Copy(io.Discard, resp.Body)
	require.NoError(t, err)
	require.NoError(t, resp.Body.Close())
	idleSince := time.Now()

	assert.Eventually(t, func() bool {
		mu.Lock()
		defer mu.Unlock()
		return len(closed) == 1
	}, 10*time.Second, 50*time.Millisecond, "the client closed its idle connection")
	mu.Lock()
	defer mu.Unlock()
	for _, at := range closed {
		assert.Less(t, at.Sub(idleSince), 5*time.Second, "closed before a 5 s keep-alive ends")
	}
}
