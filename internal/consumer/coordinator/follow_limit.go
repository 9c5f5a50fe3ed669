package coordinator

import (
	"context"
	"fmt"
	"time"

	"github.com/failsafe-go/failsafe-go/ratelimiter"

	"github.com/connect-kinesis/connect-kinesis/internal/kinesisx"
)

// How Follow adds many streams at once. Every stream added is described
// first (DescribeStreamSummary, newCoordinator) and joins its group's
// state in Redis; one after another, 100 new streams took minutes on an
// emulator under load (plugins/input TestIntegrationHundredStreamsFoundAndLeased),
// and the instance's discovery, waiting for Follow, did not list
// meanwhile. Adds run followAddConcurrency at a time, and the describes of
// the whole process share one limiter: DescribeStreamSummary is limited
// per account (20/s), and every instance of a group describes every new
// stream. A process with several inputs (or tests running several
// instances) shares it, as they share the account.
const followAddConcurrency = 4

// describePermits paces the DescribeStreamSummary calls of stream adds and
// of the input's stream listings (AcquireDescribePermit): one permit per
// 1/20 s plus 10%, as streams.Lister paces its own.
var describePermits = ratelimiter.NewSmoothWithMaxRate[any](time.Second * 11 / 10 / kinesisx.MaxDescribeStreamSummaryPerSecond)

// AcquireDescribePermit waits for the process's next DescribeStreamSummary
// permit, or for ctx to end.
func AcquireDescribePermit(ctx context.Context) error {
	if err := describePermits.AcquirePermit(ctx); err != nil {
		return fmt.Errorf("waiting for a DescribeStreamSummary permit (%d/s for the process): %w", kinesisx.MaxDescribeStreamSummaryPerSecond, err)
	}
	return nil
}
