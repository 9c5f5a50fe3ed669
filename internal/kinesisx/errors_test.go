package kinesisx

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"syscall"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/kinesis/types"
	"github.com/aws/smithy-go"
	smithyhttp "github.com/aws/smithy-go/transport/http"
	"github.com/stretchr/testify/assert"
)

// opErr wraps err the way the SDK returns it from an API call.
func opErr(err error) error {
	return &smithy.OperationError{ServiceID: "Kinesis", OperationName: "GetRecords", Err: err}
}

func httpErr(status int, err error) error {
	return &smithyhttp.ResponseError{
		Response: &smithyhttp.Response{Response: &http.Response{StatusCode: status}},
		Err:      err,
	}
}

func TestClassify(t *testing.T) {
	for _, tc := range []struct {
		name string
		err  error
		want Class
	}{
		{"provisioned throughput", opErr(httpErr(400, &types.ProvisionedThroughputExceededException{Message: aws.String("Rate exceeded")})), Throttled},
		{"limit exceeded", opErr(httpErr(400, &types.LimitExceededException{})), Throttled},
		{"kms throttling", opErr(httpErr(400, &types.KMSThrottlingException{})), Throttled},
		{"internal failure", opErr(httpErr(500, &types.InternalFailureException{})), Transient},
		{"bare 503", opErr(httpErr(503, errors.New("service unavailable"))), Transient},
		{"bare 429", opErr(httpErr(429, errors.New("too many requests"))), Throttled},
		{"unknown code on 500", opErr(httpErr(500, &smithy.GenericAPIError{Code: "Whatever"})), Transient},
		{"expired iterator", opErr(httpErr(400, &types.ExpiredIteratorException{})), ExpiredIterator},
		{"resource not found", opErr(httpErr(400, &types.ResourceNotFoundException{})), Fatal},
		{"access denied", opErr(httpErr(400, &types.AccessDeniedException{})), Fatal},
		{"unrecognized client", opErr(httpErr(400, &smithy.GenericAPIError{Code: "UnrecognizedClientException"})), Fatal},
		{"invalid argument", opErr(httpErr(400, &types.InvalidArgumentException{})), Fatal},
		{"validation", opErr(httpErr(400, &types.ValidationException{})), Fatal},
		{"connection reset", opErr(&smithyhttp.RequestSendError{Err: &net.OpError{Op: "read", Err: syscall.ECONNRESET}}), Transient},
		{"connection refused", opErr(&net.OpError{Op: "dial", Err: syscall.ECONNREFUSED}), Transient},
		{"unexpected eof", opErr(fmt.Errorf("reading body: %w", io.ErrUnexpectedEOF)), Transient},
		{"per-attempt timeout", opErr(&smithyhttp.RequestSendError{Err: context.DeadlineExceeded}), Transient},
		{"cancelled", opErr(&smithyhttp.RequestSendError{Err: context.Canceled}), Fatal},
		{"cancelled while throttled", fmt.Errorf("%w: %w", context.Canceled, &types.ProvisionedThroughputExceededException{}), Fatal},
		{"plain error", errors.New("boom"), Fatal},
		// Codes only the AWS SDK's retry package lists: they classify as the
		// SDK's standard retryer would treat them.
		{"sdk: ThrottlingException", opErr(httpErr(400, &smithy.GenericAPIError{Code: "ThrottlingException"})), Throttled},
		{"sdk: Throttling", opErr(httpErr(400, &smithy.GenericAPIError{Code: "Throttling"})), Throttled},
		{"sdk: RequestLimitExceeded", opErr(httpErr(400, &smithy.GenericAPIError{Code: "RequestLimitExceeded"})), Throttled},
		{"sdk: TooManyRequestsException", opErr(httpErr(400, &smithy.GenericAPIError{Code: "TooManyRequestsException"})), Throttled},
		{"sdk: RequestTimeout", opErr(httpErr(400, &smithy.GenericAPIError{Code: "RequestTimeout"})), Transient},
		{"sdk: RequestTimeoutException", opErr(httpErr(408, &smithy.GenericAPIError{Code: "RequestTimeoutException"})), Transient},
		{"sdk: 500", opErr(httpErr(500, errors.New("internal server error"))), Transient},
		{"sdk: 502", opErr(httpErr(502, errors.New("bad gateway"))), Transient},
		{"sdk: 504", opErr(httpErr(504, errors.New("gateway timeout"))), Transient},
		{"modeled 429", opErr(httpErr(429, &types.LimitExceededException{})), Throttled},
		{"kinesis code on a 400: internal failure", opErr(httpErr(400, &smithy.GenericAPIError{Code: "InternalFailure"})), Transient},
		{"kinesis code on a 400: service unavailable", opErr(httpErr(400, &smithy.GenericAPIError{Code: "ServiceUnavailable"})), Transient},
		{"expired iterator on a 500", opErr(httpErr(500, &types.ExpiredIteratorException{})), ExpiredIterator},
		{"cancelled during a 503", fmt.Errorf("%w: %w", context.Canceled, httpErr(503, errors.New("unavailable"))), Fatal},
		{"broken pipe", opErr(&net.OpError{Op: "write", Err: syscall.EPIPE}), Transient},
		{"closed connection", opErr(fmt.Errorf("reading: %w", net.ErrClosed)), Transient},
		{"host does not resolve", opErr(&smithyhttp.RequestSendError{Err: &net.DNSError{Err: "no such host", Name: "kinesis.nowhere", IsNotFound: true}}), Transient},
		{"eof", opErr(fmt.Errorf("reading body: %w", io.EOF)), Transient},
		{"nil", nil, Fatal},
	} {
		t.Run(tc.name, func(t *testing.T) {
			assert.Equal(t, tc.want.String(), Classify(tc.err).String())
			assert.Equal(t, tc.want == Throttled || tc.want == Transient, Retryable(tc.err))
		})
	}
}

func TestErrorCode(t *testing.T) {
	assert.Equal(t, CodeProvisionedThroughputExceeded, ErrorCode(opErr(httpErr(400, &types.ProvisionedThroughputExceededException{}))))
	assert.Equal(t, "HTTP502", ErrorCode(opErr(httpErr(502, errors.New("bad gateway")))))
	assert.Equal(t, "NetworkError", ErrorCode(opErr(&net.OpError{Op: "dial", Err: syscall.ECONNREFUSED})))
	assert.Equal(t, "unknown", ErrorCode(errors.New("boom")))
	// A connection cut mid-response: the SDK reports status 0.
	cut := opErr(httpErr(0, &smithyhttp.RequestSendError{Err: io.ErrUnexpectedEOF}))
	assert.Equal(t, "NetworkError", ErrorCode(cut))
	assert.Equal(t, Transient, Classify(cut))
	// A 200 whose body the connection lost (seen on kinesalite): the
	// request was taken, so it is named for that, not "HTTP200", and
	// retried as a network fault.
	lost := opErr(httpErr(200, &smithy.DeserializationError{Err: &net.OpError{Op: "read", Net: "tcp", Err: net.ErrClosed}}))
	assert.Equal(t, CodeAnswerLost, ErrorCode(lost))
	assert.Equal(t, Transient, Classify(lost))
}

func TestRecordCodeRetryable(t *testing.T) {
	assert.True(t, RecordCodeRetryable(CodeProvisionedThroughputExceeded))
	assert.True(t, RecordCodeRetryable(CodeInternalFailure))
	assert.True(t, RecordCodeRetryable(CodeKMSThrottling))
	assert.False(t, RecordCodeRetryable(""))
}

func TestIsAccessDenied(t *testing.T) {
	assert.True(t, IsAccessDenied(opErr(httpErr(400, &smithy.GenericAPIError{Code: "UnrecognizedClientException"}))))
	assert.True(t, IsAccessDenied(opErr(httpErr(400, &types.AccessDeniedException{}))))
	assert.True(t, IsAccessDenied(opErr(httpErr(400, &types.KMSAccessDeniedException{}))))
	assert.False(t, IsAccessDenied(opErr(httpErr(400, &types.ResourceNotFoundException{}))))
	assert.False(t, IsAccessDenied(opErr(httpErr(400, &types.ProvisionedThroughputExceededException{}))))
}

// IsNotFound knows ResourceNotFound as a call's answer and as the error a
// subscription's stream ends with (an event-stream exception, not wrapped
// in an HTTP response), and nothing else.
func TestIsNotFound(t *testing.T) {
	assert.True(t, IsNotFound(opErr(httpErr(400, &types.ResourceNotFoundException{}))), "a call's answer")
	assert.True(t, IsNotFound(&types.ResourceNotFoundException{Message: aws.String("Shard does not exist")}), "in-stream")
	assert.True(t, IsNotFound(fmt.Errorf("subscribing: %w", &types.ResourceNotFoundException{})), "wrapped")
	assert.False(t, IsNotFound(opErr(httpErr(400, &types.ResourceInUseException{}))))
	assert.False(t, IsNotFound(io.ErrUnexpectedEOF))
	assert.False(t, IsNotFound(nil))
}

// A call its StallGuard gave up is a connection timeout, retried with
// backoff, not the caller giving up (which its cancelled context says).
func TestStalledCallIsTransient(t *testing.T) {
	g := NewStallGuard(t.Context(), time.Millisecond)
	<-g.Context().Done()
	err := g.Done(opErr(fmt.Errorf("sending: %w", g.Context().Err())))
	assert.ErrorIs(t, err, ErrStalled)
	assert.Equal(t, Transient, Classify(err))
	assert.NoError(t, NewStallGuard(t.Context(), time.Hour).Done(nil))
}
