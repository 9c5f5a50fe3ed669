package coordinator

import (
	"context"
	"sync/atomic"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/kinesis"
	"github.com/aws/aws-sdk-go-v2/service/kinesis/types"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/connect-kinesis/connect-kinesis/internal/consumer"
	"github.com/connect-kinesis/connect-kinesis/internal/consumer/consumertest"
)

// describeGate refuses every DescribeStreamSummary while closed, as an
// account whose describes are throttled would.
type describeGate struct {
	*streamsAPI
	open  atomic.Bool
	calls atomic.Int64
}

func (g *describeGate) DescribeStreamSummary(ctx context.Context, in *kinesis.DescribeStreamSummaryInput, o ...func(*kinesis.Options)) (*kinesis.DescribeStreamSummaryOutput, error) {
	g.calls.Add(1)
	if !g.open.Load() {
		return nil, consumertest.APIErr(400, &types.LimitExceededException{Message: aws.String("Rate exceeded for account")})
	}
	return g.streamsAPI.DescribeStreamSummary(ctx, in, o...)
}

// A stream discovery found starts from what discovery knows (name, ARN,
// creation time): it is leased and read while DescribeStreamSummary is
// refused, and learns its retention (the lag warnings' threshold) once a
// describe succeeds. Describing first, as a named stream is, every
// instance of a group would spend its account's 20 describes a second on
// each new stream before taking any of its shards.
func TestFoundStreamIsReadBeforeItIsDescribed(t *testing.T) {
	t.Parallel()
	api := &describeGate{streamsAPI: newStreamsAPI()}
	const records = 30
	api.create("t-1", 2, records, time.Unix(1_700_000_000, 0))
	stores := &storesByStream{}
	var got streamLog
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	c := startFollower(ctx, t, api, stores, "a", &got, []Found{api.streamsAPI.found("t-1", consumer.StartTrimHorizon)})
	require.Eventually(t, func() bool { n, _ := got.count("t-1"); return n == 2*records }, 10*time.Second, 20*time.Millisecond, "every record read while describes are refused")
	// The describe waits for the process's describe limiter (18/s), which
	// the package's other tests share: those that add many streams queue
	// hundreds of permits ahead of it (10 s did not do in a full
	// `make test`).
	const permitWait = time.Minute
	require.Eventually(t, func() bool { return api.calls.Load() > 0 }, permitWait, 20*time.Millisecond, "the retention was asked for")
	co := c.followed[consumertest.FakeARNPrefix+"t-1"].co
	lagWarn, retention := co.lag()
	assert.Zero(t, retention, "no retention known yet")
	assert.Zero(t, lagWarn)

	api.open.Store(true)
	require.Eventually(t, func() bool { _, r := co.lag(); return r == 24*time.Hour }, permitWait, 20*time.Millisecond, "the retention, once described")
	lagWarn, _ = co.lag()
	assert.Equal(t, 12*time.Hour, lagWarn, "lag warnings at half the retention")
}
