package producer

import (
	"context"
	"errors"
)

// Reasons a message failed for good, the `reason` label of
// kinesis_output_failed_total.
const (
	// FailInvalid: the message can never be written (empty or too long
	// partition key, bad hash key, too large, interpolation failed).
	FailInvalid = "invalid"
	// FailRefused: Kinesis refused the record until the retry budget ran out.
	FailRefused = "refused"
	// FailEarlierFailed: ordered output; not sent because an earlier
	// message with its partition key failed.
	FailEarlierFailed = "earlier_failed"
	// FailCanceled: the write was cancelled (shutdown, or the pipeline's
	// context ended) before the record was accepted.
	FailCanceled = "canceled"
	// FailRequest: the PutRecords call itself failed after its attempts
	// (an error for the whole request, not for the record).
	FailRequest = "request_failed"
)

// FailReason classifies an error Write returned for an entry.
func FailReason(err error) string {
	var refused *RecordError
	switch {
	case errors.Is(err, ErrEmptyPartitionKey), errors.Is(err, ErrPartitionKeyTooLong),
		errors.Is(err, ErrPartitionKeyNotUTF8), errors.Is(err, ErrInvalidHashKey), errors.Is(err, ErrRecordTooLarge):
		return FailInvalid
	case errors.Is(err, ErrEarlierRecordFailed):
		return FailEarlierFailed
	case errors.As(err, &refused):
		return FailRefused
	case errors.Is(err, context.Canceled), errors.Is(err, context.DeadlineExceeded):
		return FailCanceled
	}
	return FailRequest
}
