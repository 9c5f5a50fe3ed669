package chaos

import (
	"net/http"
	"net/http/httptest"
	"sync/atomic"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	awshttp "github.com/aws/aws-sdk-go-v2/aws/transport/http"
	"github.com/aws/aws-sdk-go-v2/service/kinesis"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/connect-kinesis/connect-kinesis/internal/kinesisx"
	"github.com/connect-kinesis/connect-kinesis/internal/testenv"
)

// A runner's mutation that gets no answer while the soak's probe holds the
// emulator stalled is sent again until the emulator answers; one the
// emulator refuses is not, and neither is one that timed out with no
// stall held. The emulator here answers nothing for its first three
// calls (each attempt times out), then answers DeleteStream.
func TestRunnerCallsOutlastEmulatorStalls(t *testing.T) {
	t.Parallel()
	var calls atomic.Int64
	notFound := atomic.Bool{}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if calls.Add(1) <= 3 {
			time.Sleep(300 * time.Millisecond)
			return
		}
		w.Header().Set("Content-Type", "application/x-amz-json-1.1")
		if notFound.Load() {
			w.WriteHeader(http.StatusBadRequest)
			_, _ = w.Write([]byte(`{"__type":"ResourceNotFoundException","message":"Stream s not found"}`))
			return
		}
		_, _ = w.Write([]byte(`{}`))
	}))
	t.Cleanup(srv.Close)
	kc := testenv.KinesisClient(srv.URL, func(o *kinesis.Options) {
		o.Retryer = aws.NopRetryer{}
		o.HTTPClient = awshttp.NewBuildableClient().WithTimeout(100 * time.Millisecond)
	})
	del := func() error {
		_, err := kc.DeleteStream(t.Context(), &kinesis.DeleteStreamInput{StreamName: aws.String("s")})
		return err
	}
	stalled := atomic.Bool{}
	var stall atomic.Int64 // the probe's stall time, growing by a second a call while stalled
	r := &runner{logf: t.Logf, stalledFor: func() time.Duration {
		if stalled.Load() {
			stall.Add(int64(time.Second))
		}
		return time.Duration(stall.Load())
	}}

	// No stall held: the timeout is the runner's to report.
	require.Error(t, r.outlastStalls(t.Context(), del))
	assert.EqualValues(t, 1, calls.Load())

	// Stalled: sent again until answered.
	stalled.Store(true)
	require.NoError(t, r.outlastStalls(t.Context(), del))
	assert.EqualValues(t, 4, calls.Load(), "two more timeouts, then the answer")

	// An error the emulator sent is returned at once, stall or not.
	notFound.Store(true)
	err := r.outlastStalls(t.Context(), del)
	assert.Equal(t, kinesisx.CodeResourceNotFound, kinesisx.ErrorCode(err))
	assert.EqualValues(t, 5, calls.Load())
}

// The drain waits its bound past whatever time the emulator stalled in
// it, up to drainMax: seed 10 with efo judged 11,433 records lost after a
// drain spent wholly inside a 16 min 32 s stall.
func TestDrainWaitsOutEmulatorStalls(t *testing.T) {
	t.Parallel()
	assert.True(t, drainOpen(drainBound-time.Second, 0))
	assert.False(t, drainOpen(drainBound, 0), "no stall: the bound as before")
	assert.True(t, drainOpen(drainBound+time.Minute, 2*time.Minute), "a stall's time is added")
	assert.False(t, drainOpen(drainBound+2*time.Minute, 2*time.Minute))
	assert.False(t, drainOpen(drainMax, time.Hour), "never past drainMax")
}
