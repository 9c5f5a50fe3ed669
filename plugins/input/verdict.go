package input

import (
	"errors"

	"github.com/redpanda-data/benthos/v4/public/service"
)

// Which messages of a batch the pipeline failed (docs/poison-records.md,
// "Which records failed"). The input indexes each batch before it hands it
// over (MessageBatch.Index, which tags the messages, so it must run before
// Benthos sees them) and reads the ack's error with the indexer: an output
// or a reject_errored that names the failed messages sends a
// *service.BatchError, and Benthos hands it to the input's ack as it is
// (public/service/input.go, airGapBatchReader). An output with a batching
// policy, or one that returns a plain error, fails the whole batch.

// messageVerdicts returns, for each of the n messages of the batch idx was
// made from, the error it failed with, or nil when it succeeded, and
// whether the error named the messages (false: every message carries err,
// and only halving the batch can tell which failed). A message walked
// more than once (a processor duplicated it) failed if any copy failed;
// one never walked (filtered out, or lost in a re-batching) failed with
// the batch's error, as Benthos' own transaction tracking decides.
func messageVerdicts(idx *service.Indexer, n int, err error) (verdicts []error, named bool) {
	verdicts = make([]error, n)
	if err == nil {
		return verdicts, true
	}
	var bErr *service.BatchError
	if idx == nil || !errors.As(err, &bErr) || bErr.IndexedErrors() == 0 {
		for i := range verdicts {
			verdicts[i] = err
		}
		return verdicts, false
	}
	ok := make([]bool, n)
	failed := make([]bool, n)
	bErr.WalkMessagesIndexedBy(idx, func(i int, _ *service.Message, mErr error) bool {
		if i < 0 || i >= n {
			return true
		}
		if mErr != nil {
			failed[i], verdicts[i] = true, mErr
		} else {
			ok[i] = true
		}
		return true
	})
	for i := range verdicts {
		if !failed[i] && !ok[i] {
			verdicts[i] = err
		}
	}
	return verdicts, true
}
