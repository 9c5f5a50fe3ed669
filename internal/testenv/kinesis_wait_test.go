package testenv

import (
	"net/http"
	"net/http/httptest"
	"sync/atomic"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// An emulator that leaves one DescribeStreamSummary unanswered does not
// make the wait for ACTIVE fail: the call is given up after
// describeTimeout and the next one is answered (kinesis-mock under the
// soak's efo load left a request unanswered for a minute; the wait used
// its whole minute on it and ended the hour).
func TestWaitActiveGoesOnPastAnUnansweredCall(t *testing.T) {
	t.Parallel()
	var calls atomic.Int32
	release := make(chan struct{})
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if calls.Add(1) == 1 {
			select { // the first call is never answered
			case <-release:
			case <-r.Context().Done():
			}
			return
		}
		w.Header().Set("Content-Type", "application/x-amz-json-1.1")
		_, _ = w.Write([]byte(`{"StreamDescriptionSummary":{"StreamName":"s","StreamARN":"arn:aws:kinesis:us-east-1:000000000000:stream/s","StreamStatus":"ACTIVE","OpenShardCount":1}}`))
	}))
	t.Cleanup(func() { close(release); srv.Close() })
	k := &Kinesis{Kind: KindKinesisMock, Endpoint: srv.URL}

	arn, err := k.WaitActiveWithin(t.Context(), "s", 3*describeTimeout)
	require.NoError(t, err)
	assert.Equal(t, "arn:aws:kinesis:us-east-1:000000000000:stream/s", arn)
	assert.GreaterOrEqual(t, calls.Load(), int32(2))
}
