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
