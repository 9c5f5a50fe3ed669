package coordinator

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/service/kinesis"
	"github.com/stretchr/testify/assert"

	"github.com/connect-kinesis/connect-kinesis/internal/consumer/consumertest"
	"github.com/connect-kinesis/connect-kinesis/internal/kinesisx"
)

// describeTimes is a fake Kinesis that notes when each
// DescribeStreamSummary was sent.
type describeTimes struct {
	*consumertest.Kinesis
	mu    sync.Mutex
	times []time.Time
}

func (d *describeTimes) DescribeStreamSummary(ctx context.Context, in *kinesis.DescribeStreamSummaryInput, opts ...func(*kinesis.Options)) (*kinesis.DescribeStreamSummaryOutput, error) {
	d.mu.Lock()
	d.times = append(d.times, time.Now())
	d.mu.Unlock()
	return d.Kinesis.DescribeStreamSummary(ctx, in, opts...)
}

// busiestSecond is the most calls sent within any one second.
func (d *describeTimes) busiestSecond() int {
	d.mu.Lock()
	defer d.mu.Unlock()
	most := 0
	for i, t := range d.times {
		n := 0
		for _, u := range d.times[i:] {
			if u.Sub(t) < time.Second {
				n++
			}
		}
		most = max(most, n)
	}
	return most
}

// Guards the defect: the DescribeStreamSummary calls a stream's readers
// make when Kinesis does not find their shard (is the stream recreated?)
// had no rate limit: every reader of a deleted stream described it at
// once, past Kinesis' 20 calls a second for the account, and throttled
// every other describe of the account. They now take the process's
// describe permits, as stream adds do.
func TestRecreatedChecksKeepToTheDescribeLimit(t *testing.T) {
	api := &describeTimes{Kinesis: consumertest.NewKinesis()}
	c := &Consumer{cfg: testConfig(), api: api, describes: kinesisx.NewPace(kinesisx.MaxDescribeStreamSummaryPerSecond)}
	co := blankCoordinator(c, "s")
	co.setCreated(time.Now().Add(-time.Hour))
	const readers = 40
	var wg sync.WaitGroup
	for range readers {
		wg.Go(func() { co.recreatedSince(t.Context()) })
	}
	wg.Wait()
	api.mu.Lock()
	sent := len(api.times)
	api.mu.Unlock()
	assert.Equal(t, readers, sent)
	assert.LessOrEqual(t, api.busiestSecond(), kinesisx.MaxDescribeStreamSummaryPerSecond, "describes within one second")
}
