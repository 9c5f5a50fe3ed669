package coordinator

import (
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/kinesis"
	"github.com/aws/aws-sdk-go-v2/service/kinesis/types"
	"github.com/failsafe-go/failsafe-go"

	"github.com/connect-kinesis/connect-kinesis/internal/consumer"
	"github.com/connect-kinesis/connect-kinesis/internal/kinesisx"
)

// How a coordinator starts: a named stream is described first (it may not
// exist, or not be readable: the error says which field to fix); a stream
// discovery found starts from what discovery knows.

// newCoordinator describes the stream, failing with advice when it does not
// exist or may not be read.
func newCoordinator(ctx context.Context, c *Consumer, configured string, found bool) (*coordinator, error) {
	co := blankCoordinator(c, configured)
	co.found = found
	sum, err := co.describe(ctx)
	if err != nil {
		if kinesisx.ErrorCode(err) == kinesisx.CodeResourceNotFound {
			return nil, fmt.Errorf("stream %s does not exist here: check the streams, region and endpoint fields: %w", configured, err)
		}
		if kinesisx.IsAccessDenied(err) {
			return nil, fmt.Errorf("access to stream %s is denied: check the credentials and region fields and the role's kinesis:DescribeStreamSummary, ListShards, GetShardIterator and GetRecords permissions: %w", configured, err)
		}
		return nil, fmt.Errorf("describing stream %s: %w", configured, err)
	}
	co.streamName = aws.ToString(sum.StreamName)
	if co.streamName == "" {
		co.streamName = configured
	}
	// The ARN is the identity so that a name and an ARN reach the same
	// checkpoints; an emulator without ARNs falls back to the name.
	co.id = aws.ToString(sum.StreamARN)
	if co.id == "" {
		co.id = co.streamName
	}
	co.setCreated(aws.ToTime(sum.StreamCreationTimestamp))
	co.setRetention(time.Duration(aws.ToInt32(sum.RetentionPeriodHours)) * time.Hour)
	return co, co.open(ctx)
}

// newFoundCoordinator starts a stream discovery found. What discovery knows
// (its name, ARN and creation time) is its identity, so no
// DescribeStreamSummary is made first: every instance of the group adds
// every new stream, and at Kinesis' 20 describes a second per account, 100
// new streams and 4 instances would take 20 s before the first lease. Its
// retention, which only the lag warnings use, is described once the run
// loop started (describeLater). Without an ARN or a creation time (an
// endpoint that gives neither) it is described first, as a named stream.
func newFoundCoordinator(ctx context.Context, c *Consumer, f Found) (*coordinator, error) {
	if !strings.HasPrefix(f.Key, "arn:") || f.Created.IsZero() {
		return newCoordinator(ctx, c, f.Name, true)
	}
	co := blankCoordinator(c, f.Name)
	co.found = true
	co.streamName, co.id, co.describeLater = f.Name, f.Key, true
	co.setCreated(f.Created)
	co.setRetention(0)
	return co, co.open(ctx)
}

func blankCoordinator(c *Consumer, configured string) *coordinator {
	co := &coordinator{
		c:             c,
		configured:    configured,
		start:         c.cfg.StartPosition,
		listRetry:     kinesisx.RetryBuilder[*kinesis.ListShardsOutput](c.cfg.Backoff).Build(),
		listed:        map[string]consumer.Shard{},
		unlistedSince: map[string]time.Time{},
		readers:       map[string]shardReader{},
		handedOff:     map[string]time.Time{},
		asked:         map[string]time.Time{},
		moved:         map[string]time.Time{},
		lastOwner:     map[string]string{},
		discoverNow:   make(chan struct{}, 1),
		rounds:        make(chan roundRead, 1),
		forgot:        make(chan struct{}, 1),
		readerDone:    make(chan shardReader),
		stopReq:       make(chan struct{}),
		runDone:       make(chan struct{}),
		giveUp:        make(chan struct{}),
		renewStop:     make(chan struct{}),
		renewDone:     make(chan struct{}),
	}
	co.api = throttleCounting{api: c.api, observed: func(err error) {
		if err != nil && kinesisx.IsThrottle(err) {
			c.metrics.Throttled.Incr(1, co.streamName)
		}
	}}
	return co
}

// open joins the group's state of the stream and resolves its enhanced
// fan-out consumer, once its identity is known.
func (co *coordinator) open(ctx context.Context) error {
	co.store = forgetWatch{Store: co.c.stores(co.id), forgot: co.storeForgot}
	co.log = co.c.log.With("stream", co.streamName)
	if err := co.join(ctx); err != nil {
		return fmt.Errorf("joining the group's checkpoints of stream %s: %w", co.configured, err)
	}
	return co.useFanOut(ctx)
}

func (co *coordinator) setCreated(t time.Time) {
	co.created = t
	if !t.IsZero() {
		co.createdSeen.Store(t.UnixNano())
	}
}

// describe reads the stream's summary, retrying, each attempt within the
// process's describe limit.
func (co *coordinator) describe(ctx context.Context) (*types.StreamDescriptionSummary, error) {
	in := &kinesis.DescribeStreamSummaryInput{}
	in.StreamName, in.StreamARN = kinesisx.StreamRef(co.configured)
	policy := kinesisx.RetryBuilder[*kinesis.DescribeStreamSummaryOutput](co.c.cfg.Backoff).Build()
	out, err := failsafe.With(policy).WithContext(ctx).Get(func() (*kinesis.DescribeStreamSummaryOutput, error) {
		if err := co.c.acquireDescribe(ctx); err != nil {
			return nil, err
		}
		return co.api.DescribeStreamSummary(ctx, in)
	})
	if err != nil {
		return nil, err
	}
	if out.StreamDescriptionSummary == nil {
		return nil, fmt.Errorf("describing stream %s: the answer holds no description", co.configured)
	}
	return out.StreamDescriptionSummary, nil
}

// lagThresholds are a stream's lag thresholds: lag_warn_threshold (or
// half the retention) and the retention; 0 when unknown.
type lagThresholds struct{ lagWarn, retention time.Duration }

// setRetention sets the thresholds from the stream's retention (0:
// unknown, so only a configured lag_warn_threshold warns).
func (co *coordinator) setRetention(retention time.Duration) {
	t := lagThresholds{lagWarn: co.c.cfg.LagWarnThreshold, retention: retention}
	if t.lagWarn == 0 {
		t.lagWarn = retention / 2
	}
	co.thresholds.Store(&t)
}

// lag returns the stream's lag thresholds.
func (co *coordinator) lag() (lagWarn, retention time.Duration) {
	if t := co.thresholds.Load(); t != nil {
		return t.lagWarn, t.retention
	}
	return 0, 0
}

// describeRetention describes a stream started without (describeLater)
// for its retention, within the process's describe limit, retrying until
// it succeeds or the run ends.
func (co *coordinator) describeRetention(ctx context.Context) {
	for ctx.Err() == nil {
		sum, err := co.describe(ctx)
		if err == nil {
			co.setRetention(time.Duration(aws.ToInt32(sum.RetentionPeriodHours)) * time.Hour)
			return
		}
		if ctx.Err() == nil {
			co.log.Debugf("Describing the stream for its retention failed; its lag warnings wait for it: %v", err)
		}
		select {
		case <-ctx.Done():
		case <-time.After(co.c.cfg.DiscoveryInterval):
		}
	}
}
