package producer

import (
	"context"
	"errors"
	"fmt"
	"testing"

	"github.com/stretchr/testify/assert"
)

func TestFailReason(t *testing.T) {
	t.Parallel()
	for want, err := range map[string]error{
		FailInvalid:       fmt.Errorf("%w: 2 MiB", ErrRecordTooLarge),
		FailRefused:       &RecordError{Code: "ProvisionedThroughputExceededException", Attempts: 5},
		FailEarlierFailed: fmt.Errorf("%w (partition key %q): %w", ErrEarlierRecordFailed, "k", &RecordError{Code: "InternalFailure"}),
		FailCanceled:      context.Canceled,
		FailRequest:       errors.New("writing 3 records to stream s after 5 attempts: AccessDeniedException"),
	} {
		assert.Equal(t, want, FailReason(err), "%v", err)
	}
}
