package kinesisx

import (
	"context"
	"errors"
	"strings"
	"time"

	"github.com/aws/smithy-go"
	smithyhttp "github.com/aws/smithy-go/transport/http"
)

// ErrPermanent marks an error that will not pass by itself: a setting is
// missing or wrong (no region, no credentials). Mark one with
// MarkPermanent; Permanent finds it.
var ErrPermanent = errors.New("permanent")

type permanentError struct{ error }

func (e permanentError) Unwrap() error        { return e.error }
func (e permanentError) Is(target error) bool { return target == ErrPermanent }

// MarkPermanent marks err as one that only a change of configuration,
// credentials or permissions can fix. Its message is unchanged.
func MarkPermanent(err error) error {
	if err == nil {
		return nil
	}
	return permanentError{err}
}

// redisRefusals are the replies of a Redis that refuses the client's
// credentials or permissions: only the operator can fix them.
var redisRefusals = []string{"WRONGPASS", "NOAUTH", "NOPERM", "ERR AUTH", "ERR invalid password", "ERR Client sent AUTH", "the Redis user may not"}

// Permanent reports whether err, from connecting to Kinesis or Redis, will
// not pass by itself: a stream that does not exist, denied access, unknown
// credentials or a missing setting (Kinesis answers these Fatal in
// Classify), or a Redis that refuses the password or a permission
// (WRONGPASS, NOAUTH, NOPERM). Everything else, a refused or cut
// connection, a timeout, throttling, a Redis still loading, may pass and is
// not permanent; so is an error this does not recognise.
func Permanent(err error) bool {
	if err == nil || errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded) {
		return false
	}
	if errors.Is(err, ErrPermanent) {
		return true
	}
	var reply interface{ RedisError() }
	if errors.As(err, &reply) {
		msg := reply.(error).Error()
		for _, r := range redisRefusals {
			if strings.Contains(msg, r) {
				return true
			}
		}
		return false
	}
	var apiErr smithy.APIError
	var respErr *smithyhttp.ResponseError
	if errors.As(err, &apiErr) || errors.As(err, &respErr) {
		return Classify(err) == Fatal
	}
	return false
}

// Connect backoff for permanent errors: Benthos retries a failed Connect
// about once a second (its own backoff, 100 ms to 1 s); an error that will
// not pass by itself waits longer each time, up to ConnectMaxWait, so the log
// says it once in a while instead of every second. Benthos owns the loop
// that retries Connect: the input only tells it how long to wait
// (service.ErrBackOff), so this is a delay, not a second retry mechanism.
const (
	ConnectFirstWait = 2 * time.Second
	ConnectMaxWait   = 30 * time.Second
)

// ConnectWait is the wait after the n-th permanent failure in a row (n from
// 1): 2 s, 4 s, 8 s, 16 s, then 30 s.
func ConnectWait(n int) time.Duration {
	w := ConnectFirstWait
	for i := 1; i < n && w < ConnectMaxWait; i++ {
		w *= 2
	}
	return min(w, ConnectMaxWait)
}
