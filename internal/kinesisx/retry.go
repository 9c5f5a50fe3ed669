package kinesisx

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/failsafe-go/failsafe-go/retrypolicy"
	"github.com/redpanda-data/benthos/v4/public/service"

	"github.com/connect-kinesis/connect-kinesis/internal/lintrule"
)

// Field names of the standard retry group.
const (
	FieldMaxRetries      = "max_retries"
	FieldBackoff         = "backoff"
	FieldInitialInterval = "initial_interval"
	FieldMaxInterval     = "max_interval"
	FieldMaxElapsedTime  = "max_elapsed_time"
)

// Backoff is the parsed form of the `max_retries` and `backoff` fields.
type Backoff struct {
	// MaxRetries bounds the retries after the first attempt; 0 means no bound
	// on the count (MaxElapsedTime still applies).
	MaxRetries int
	// InitialInterval is the first delay; each retry doubles it up to
	// MaxInterval.
	InitialInterval time.Duration
	MaxInterval     time.Duration
	// MaxElapsedTime bounds the whole retry loop; 0 means no bound on time.
	MaxElapsedTime time.Duration
}

// DefaultBackoff is what the fields default to.
var DefaultBackoff = Backoff{
	MaxRetries:      0,
	InitialInterval: 100 * time.Millisecond,
	MaxInterval:     5 * time.Second,
	MaxElapsedTime:  30 * time.Second,
}

// RetryFields returns the `max_retries` and `backoff` fields shared by the
// plugins, with the given defaults.
func RetryFields(def Backoff) []*service.ConfigField {
	return []*service.ConfigField{
		service.NewIntField(FieldMaxRetries).
			Description("The most times a failed request (or the failed records of a request) is sent again before the error is returned. `0` bounds retries by `backoff.max_elapsed_time` only.").
			Default(def.MaxRetries).Advanced(),
		service.NewObjectField(FieldBackoff,
			service.NewDurationField(FieldInitialInterval).
				Description("The delay before the first retry. Each further retry doubles it, with jitter, up to `max_interval`.").
				LintRule(lintrule.Duration(FieldBackoff+"."+FieldInitialInterval, def.InitialInterval.String())).
				Default(def.InitialInterval.String()),
			service.NewDurationField(FieldMaxInterval).
				Description("The longest delay between two retries.").
				LintRule(lintrule.Duration(FieldBackoff+"."+FieldMaxInterval, def.MaxInterval.String())).
				Default(def.MaxInterval.String()),
			service.NewDurationField(FieldMaxElapsedTime).
				Description("The longest time spent retrying one request before its error is returned. `0s` retries until `max_retries` is reached (or forever if that is 0 too).").
				LintRule(lintrule.Duration(FieldBackoff+"."+FieldMaxElapsedTime, def.MaxElapsedTime.String())).
				Default(def.MaxElapsedTime.String()),
		).Description("Exponential backoff with jitter between retries of throttled or failed requests.").Advanced(),
	}
}

// BackoffFromParsed reads the fields added by RetryFields and validates them.
func BackoffFromParsed(conf *service.ParsedConfig) (Backoff, error) {
	var (
		b   Backoff
		err error
	)
	if b.MaxRetries, err = conf.FieldInt(FieldMaxRetries); err != nil {
		return b, err
	}
	if b.InitialInterval, err = conf.FieldDuration(FieldBackoff, FieldInitialInterval); err != nil {
		return b, err
	}
	if b.MaxInterval, err = conf.FieldDuration(FieldBackoff, FieldMaxInterval); err != nil {
		return b, err
	}
	if b.MaxElapsedTime, err = conf.FieldDuration(FieldBackoff, FieldMaxElapsedTime); err != nil {
		return b, err
	}
	return b, b.Validate()
}

// Validate names the field that is out of range and what it accepts.
func (b Backoff) Validate() error {
	switch {
	case b.MaxRetries < 0:
		return fmt.Errorf("field %s: %d is negative; use 0 (bounded by backoff.max_elapsed_time) or a positive count", FieldMaxRetries, b.MaxRetries)
	case b.InitialInterval <= 0:
		return fmt.Errorf("field %s.%s: %v must be positive, e.g. 100ms", FieldBackoff, FieldInitialInterval, b.InitialInterval)
	case b.MaxInterval < b.InitialInterval:
		return fmt.Errorf("field %s.%s: %v is shorter than %s.%s (%v); it must be at least as long", FieldBackoff, FieldMaxInterval, b.MaxInterval, FieldBackoff, FieldInitialInterval, b.InitialInterval)
	case b.MaxElapsedTime < 0:
		return fmt.Errorf("field %s.%s: %v is negative; use 0s for no time bound or a positive duration", FieldBackoff, FieldMaxElapsedTime, b.MaxElapsedTime)
	}
	return nil
}

// RetryBuilder returns a failsafe-go retry policy builder with this backoff
// (exponential, 25% jitter), its bounds, and the project's classifier: it
// retries errors that Retryable accepts and aborts at once on a cancelled
// context. Callers may add HandleIf for results that should be retried too
// (for example a PutRecords response with failed entries) and listeners.
//
// Errors leave the policy as the last failure, not wrapped in failsafe's
// ExceededError, so users see what Kinesis said.
func RetryBuilder[R any](b Backoff) retrypolicy.Builder[R] {
	rb := retrypolicy.NewBuilder[R]().
		HandleIf(func(_ R, err error) bool { return err != nil && Retryable(err) }).
		AbortIf(func(_ R, err error) bool { return errors.Is(err, context.Canceled) }).
		WithBackoff(b.InitialInterval, b.MaxInterval).
		WithJitterFactor(0.25).
		ReturnLastFailure()
	if b.MaxRetries > 0 {
		rb = rb.WithMaxRetries(b.MaxRetries)
	} else {
		rb = rb.WithMaxRetries(-1)
	}
	if b.MaxElapsedTime > 0 {
		rb = rb.WithMaxDuration(b.MaxElapsedTime)
	}
	return rb
}
