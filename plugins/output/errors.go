package output

import (
	"fmt"

	"github.com/redpanda-data/benthos/v4/public/service"

	"github.com/connect-kinesis/connect-kinesis/internal/kinesisx"
)

// describeError turns a failed DescribeStreamSummary into one error that says
// what is wrong with which stream where.
func describeError(stream, region string, err error) error {
	switch code := kinesisx.ErrorCode(err); {
	case code == kinesisx.CodeResourceNotFound:
		return fmt.Errorf("stream %s does not exist in region %s (check `stream`, `region` and `endpoint`): %w", stream, region, err)
	case kinesisx.IsAccessDenied(err):
		return fmt.Errorf("access to stream %s in region %s is denied (check `credentials` and the role's kinesis:PutRecords and kinesis:DescribeStreamSummary permissions): %w", stream, region, err)
	default:
		return fmt.Errorf("describing stream %s in region %s: %w", stream, region, err)
	}
}

// messageError is the error of one message of a failed write: its text is
// that message's own, and it also carries the write's BatchError.
//
// Both are needed because of Benthos' batching layer (an output batching
// policy, which this output has by default): it answers each upstream
// transaction with the error of the transaction's first failed message,
// not with a BatchError. Were that a plain error, a fallback output,
// switch or auto_replay_nacks upstream would fail the whole transaction
// (every message of an input's batch) with one message's reason. Through
// messageError they find the BatchError (errors.As), walk it by source as
// they do any batch error, and get exactly their failed messages, each
// with its own reason. Without a batching policy Benthos hands the
// BatchError up as it is and the wrapper changes nothing.
type messageError struct {
	err   error
	batch *service.BatchError
}

func (e *messageError) Error() string { return e.err.Error() }

// Unwrap gives the message's own error first, so that errors.Is and
// errors.As see its causes before the batch's.
func (e *messageError) Unwrap() []error { return []error{e.err, e.batch} }
