package kinesisx

import (
	"context"
	"errors"
	"io"
	"net"
	"strconv"
	"strings"
	"syscall"

	"github.com/aws/smithy-go"
	smithyhttp "github.com/aws/smithy-go/transport/http"
)

// Class is what the classifier decides about an error.
type Class int

const (
	// Fatal errors are not retried: the request can never succeed as sent
	// (missing stream, denied access, invalid argument) or the caller gave up.
	Fatal Class = iota
	// Throttled errors mean Kinesis or KMS refused for capacity; retry later
	// with backoff.
	Throttled
	// Transient errors are service faults, timeouts and broken connections;
	// retry with backoff.
	Transient
	// ExpiredIterator means a shard iterator is older than five minutes. It is
	// not retried as sent: the reader must fetch a new iterator.
	ExpiredIterator
)

func (c Class) String() string {
	switch c {
	case Throttled:
		return "throttled"
	case Transient:
		return "transient"
	case ExpiredIterator:
		return "expired_iterator"
	default:
		return "fatal"
	}
}

// Error codes as Kinesis sends them, in API errors and in per-record results.
const (
	CodeProvisionedThroughputExceeded = "ProvisionedThroughputExceededException"
	CodeLimitExceeded                 = "LimitExceededException"
	CodeKMSThrottling                 = "KMSThrottlingException"
	CodeInternalFailure               = "InternalFailure"
	CodeServiceUnavailable            = "ServiceUnavailable"
	CodeExpiredIterator               = "ExpiredIteratorException"
	CodeResourceNotFound              = "ResourceNotFoundException"
	CodeResourceInUse                 = "ResourceInUseException"
)

var codeClass = map[string]Class{
	CodeProvisionedThroughputExceeded: Throttled,
	CodeLimitExceeded:                 Throttled,
	CodeKMSThrottling:                 Throttled,
	"ThrottlingException":             Throttled,
	"Throttling":                      Throttled,
	"RequestLimitExceeded":            Throttled,
	CodeInternalFailure:               Transient,
	"InternalFailureException":        Transient,
	"InternalServerError":             Transient,
	CodeServiceUnavailable:            Transient,
	"ServiceUnavailableException":     Transient,
	"RequestTimeout":                  Transient,
	"RequestTimeoutException":         Transient,
	CodeExpiredIterator:               ExpiredIterator,
}

// Classify decides what to do with an error returned by the Kinesis API (or
// the network under it). It is the only place in the project that makes that
// decision. A nil error is Fatal only in the sense that there is nothing to
// retry; callers check for nil first.
func Classify(err error) Class {
	if err == nil {
		return Fatal
	}
	// A cancelled context is the caller giving up: never retried, even when
	// the SDK wraps it in a transport error.
	if errors.Is(err, context.Canceled) {
		return Fatal
	}
	var apiErr smithy.APIError
	if errors.As(err, &apiErr) {
		if c, ok := codeClass[apiErr.ErrorCode()]; ok {
			return c
		}
	}
	var respErr *smithyhttp.ResponseError
	if errors.As(err, &respErr) {
		switch code := respErr.HTTPStatusCode(); {
		case code == 429:
			return Throttled
		case code >= 500:
			return Transient
		case code >= 400:
			return Fatal
		}
	}
	if apiErr != nil {
		// A service error with a code we do not know and no 5xx status is
		// treated as the service saying no: ResourceNotFound, AccessDenied,
		// UnrecognizedClient, InvalidArgument, Validation and their kin.
		return Fatal
	}
	if isNetworkError(err) {
		return Transient
	}
	return Fatal
}

// Retryable reports whether err is worth sending again unchanged after a
// backoff: throttling and transient faults.
func Retryable(err error) bool {
	c := Classify(err)
	return c == Throttled || c == Transient
}

// IsThrottle reports whether err is a throttling refusal.
func IsThrottle(err error) bool { return Classify(err) == Throttled }

// IsExpiredIterator reports whether err says the shard iterator expired.
func IsExpiredIterator(err error) bool { return Classify(err) == ExpiredIterator }

// ErrorCode returns the service's error code for err, a short name for a
// network failure, or "unknown". It is meant for metric labels and logs.
func ErrorCode(err error) string {
	var apiErr smithy.APIError
	if errors.As(err, &apiErr) {
		return apiErr.ErrorCode()
	}
	// A cut connection reaches us as a ResponseError with status 0: name
	// it for what it is before reading the status.
	var respErr *smithyhttp.ResponseError
	if errors.As(err, &respErr) && respErr.HTTPStatusCode() != 0 {
		return "HTTP" + strconv.Itoa(respErr.HTTPStatusCode())
	}
	if isNetworkError(err) {
		return "NetworkError"
	}
	if errors.Is(err, context.DeadlineExceeded) {
		return "Timeout"
	}
	return "unknown"
}

// IsAccessDenied reports whether err says the caller's credentials are
// unknown, expired or not allowed: a configuration problem, not a fault.
func IsAccessDenied(err error) bool {
	switch code := ErrorCode(err); code {
	case "UnrecognizedClientException", "InvalidSignatureException", "ExpiredTokenException",
		"IncompleteSignature", "InvalidClientTokenId", "MissingAuthenticationToken":
		return true
	default:
		return strings.Contains(code, "AccessDenied")
	}
}

// RecordCodeRetryable reports whether a per-record PutRecords error code is
// worth retrying. Every code Kinesis documents for a record
// (ProvisionedThroughputExceeded, InternalFailure, KMS throttling) is
// transient, and the design retries any failed entry, so only an empty code
// (a success) is not retried.
func RecordCodeRetryable(code string) bool { return code != "" }

func isNetworkError(err error) bool {
	var reqSend *smithyhttp.RequestSendError
	if errors.As(err, &reqSend) {
		return true
	}
	var netErr net.Error
	if errors.As(err, &netErr) {
		return true
	}
	if errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) ||
		errors.Is(err, syscall.ECONNRESET) || errors.Is(err, syscall.ECONNREFUSED) ||
		errors.Is(err, syscall.EPIPE) || errors.Is(err, net.ErrClosed) {
		return true
	}
	// A per-attempt timeout (not the caller's context) is transient.
	return errors.Is(err, context.DeadlineExceeded)
}
