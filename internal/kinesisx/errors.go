package kinesisx

import (
	"context"
	"errors"
	"io"
	"net"
	"net/http"
	"strconv"
	"strings"

	"github.com/aws/aws-sdk-go-v2/aws/retry"
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
	CodeInvalidArgument               = "InvalidArgumentException"
	// CodeAnswerLost is not Kinesis': ErrorCode names so an answer that
	// said success (2xx) but whose body could not be read, because the
	// connection failed under it. The request was taken, so sending it
	// again may write its records twice.
	CodeAnswerLost = "AnswerLost"
)

// kinesisCodes classifies what Kinesis says that the AWS SDK's retry package
// does not: KMS throttling, the server faults Kinesis names by code, and an
// expired iterator (the SDK knows nothing of iterators). Every other
// throttling and timeout code is the SDK's own list (sdkThrottleCodes,
// sdkRetryableCodes), so a code the SDK learns is classified here too.
var kinesisCodes = map[string]Class{
	CodeKMSThrottling:             Throttled,
	CodeInternalFailure:           Transient,
	"InternalFailureException":    Transient,
	"InternalServerError":         Transient,
	CodeServiceUnavailable:        Transient,
	"ServiceUnavailableException": Transient,
	CodeExpiredIterator:           ExpiredIterator,
}

// The AWS SDK's classification (aws/retry), which its standard retryer
// uses: throttling codes (ProvisionedThroughputExceeded, LimitExceeded,
// Throttling...), timeout codes (RequestTimeout...) and connection errors
// (reset, refused, dial, timeouts).
var (
	sdkThrottleCodes  = retry.ThrottleErrorCode{Codes: retry.DefaultThrottleErrorCodes}
	sdkRetryableCodes = retry.RetryableErrorCode{Codes: retry.DefaultRetryableErrorCodes}
	sdkConnection     = retry.RetryableConnectionError{}
)

// Classify decides what to do with an error returned by the Kinesis API (or
// the network under it). It is the only place in the project that makes that
// decision. A nil error is Fatal only in the sense that there is nothing to
// retry; callers check for nil first.
func Classify(err error) Class {
	if err == nil {
		return Fatal
	}
	// A cancelled context is the caller giving up: never retried, even when
	// the SDK wraps it in a transport error (which the SDK would retry).
	if errors.Is(err, context.Canceled) {
		return Fatal
	}
	var apiErr smithy.APIError
	if errors.As(err, &apiErr) {
		if c, ok := kinesisCodes[apiErr.ErrorCode()]; ok {
			return c
		}
		if sdkThrottleCodes.IsErrorThrottle(apiErr).Bool() {
			return Throttled
		}
		if sdkRetryableCodes.IsErrorRetryable(apiErr).Bool() {
			return Transient
		}
	}
	var respErr *smithyhttp.ResponseError
	if errors.As(err, &respErr) {
		// Wider than the SDK's 500/502/503/504: any server fault is worth
		// another try, and any 429 is throttling, modeled or not.
		switch code := respErr.HTTPStatusCode(); {
		case code == http.StatusTooManyRequests:
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

// IsUnknownSequence reports whether err is Kinesis saying that a sequence
// number given to GetShardIterator is not a record of the shard: an
// InvalidArgumentException on AWS ("... is invalid because it did not come
// from this stream"), a ResourceNotFoundException on kinesis-mock ("Unable
// to find record with provided SequenceNumber").
func IsUnknownSequence(err error) bool {
	var apiErr smithy.APIError
	if !errors.As(err, &apiErr) {
		return false
	}
	switch apiErr.ErrorCode() {
	case CodeInvalidArgument, CodeResourceNotFound:
		return strings.Contains(apiErr.ErrorMessage(), "SequenceNumber")
	}
	return false
}

// IsNotFound reports whether err is Kinesis saying that what the call
// names does not exist (ResourceNotFoundException): a stream, a shard, a
// stream consumer. It is Fatal for the call as sent; what is gone, and
// what to do, is for the caller to find out. A subscription's stream that
// ends with it is the same answer arriving in-stream: the consumer was
// deregistered, or the shard or its stream is gone, and the next
// SubscribeToShard tells which.
func IsNotFound(err error) bool {
	var apiErr smithy.APIError
	return errors.As(err, &apiErr) && apiErr.ErrorCode() == CodeResourceNotFound
}

// ErrorCode returns the service's error code for err, a short name for a
// network failure, or "unknown". It is meant for metric labels and logs.
func ErrorCode(err error) string {
	var apiErr smithy.APIError
	if errors.As(err, &apiErr) {
		return apiErr.ErrorCode()
	}
	// A cut connection reaches us as a ResponseError with status 0: name
	// it for what it is before reading the status. A success whose body
	// was lost is not a success.
	var respErr *smithyhttp.ResponseError
	if errors.As(err, &respErr) && respErr.HTTPStatusCode()/100 == 2 {
		var deserErr *smithy.DeserializationError
		if errors.As(err, &deserErr) {
			return CodeAnswerLost
		}
	}
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

// isNetworkError reports a failure of the connection rather than an answer
// of the service. The SDK's check covers sends that never completed, reset,
// refused and dialled connections and timeouts (a per-attempt timeout, not
// the caller's context, is transient). Beyond it: a body cut short (EOF) and
// any other net.Error, including a host name that does not resolve, which
// the SDK gives up on but a restarting endpoint or proxy briefly causes.
func isNetworkError(err error) bool {
	if sdkConnection.IsErrorRetryable(err).Bool() {
		return true
	}
	var netErr net.Error
	return errors.As(err, &netErr) || errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF)
}
