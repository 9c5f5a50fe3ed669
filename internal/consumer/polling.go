package consumer

import (
	"cmp"
	"context"
	"fmt"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/kinesis"
	"github.com/aws/aws-sdk-go-v2/service/kinesis/types"
	"github.com/failsafe-go/failsafe-go"
	"github.com/redpanda-data/benthos/v4/public/service"

	"github.com/connect-kinesis/connect-kinesis/internal/kinesisx"
)

// getRecordsTimeout bounds one GetRecords attempt. A response is at most
// 10 MiB; 20 seconds is far beyond what that takes on a working link.
const getRecordsTimeout = 20 * time.Second

// defaultWarnEvery spaces the warnings of a shard that keeps failing when
// backoff.max_elapsed_time is 0 (no bound).
const defaultWarnEvery = 30 * time.Second

// pollingSource is the RecordSource of GetRecords polling. It gets an
// iterator where it was told to start, then reads with GetRecords, each call
// at least poll_interval after the previous answer (idle_poll_interval after
// an empty answer at the tip). An expired iterator is renewed after the last
// record returned. Every failure is retried by one failsafe-go policy built
// with the source, until the reader stops.
type pollingSource struct {
	api        KinesisAPI
	stream     string // as configured: a name or an ARN
	shard      string
	limit      int32
	poll, idle time.Duration
	log        *service.Logger
	onExpired  func()

	exec failsafe.Executor[*kinesis.GetRecordsOutput]
	// warnEvery spaces the warnings of one failing Next; warned is the
	// elapsed time of its last warning.
	warnEvery time.Duration
	warned    time.Duration

	from       startSpec // where the next iterator starts
	iter       string    // empty until got, and again once it expired
	answeredAt time.Time // when the last GetRecords was answered
	nextAt     time.Time // the earliest moment of the next GetRecords
}

func newPollingSource(co *coordinator, shard string, from startSpec, log *service.Logger) *pollingSource {
	cfg := &co.c.cfg
	s := &pollingSource{
		api:       co.api,
		stream:    co.configured,
		shard:     shard,
		limit:     int32(cfg.Limit),
		poll:      cfg.PollInterval,
		idle:      cfg.IdlePollInterval,
		log:       log,
		onExpired: func() { co.c.metrics.expired.Incr(1, co.streamName) },
		warnEvery: cmp.Or(cfg.Backoff.MaxElapsedTime, defaultWarnEvery),
		from:      from,
	}
	// Reading a shard is retried until the reader stops: a shard is never
	// given up. Retries back off from at least poll_interval; each attempt
	// also waits for its pacing slot, so however the jittered delays fall,
	// calls reach Kinesis at least poll_interval apart.
	bo := cfg.Backoff
	bo.InitialInterval = max(bo.InitialInterval, cfg.PollInterval)
	bo.MaxInterval = max(bo.MaxInterval, bo.InitialInterval)
	bo.MaxRetries, bo.MaxElapsedTime = 0, 0
	p := kinesisx.RetryBuilder[*kinesis.GetRecordsOutput](bo).
		HandleIf(func(_ *kinesis.GetRecordsOutput, err error) bool { return err != nil }).
		// A shard or stream that does not exist is the reader's to judge
		// (trimmed, or deleted), not a failure to retry blindly.
		AbortIf(func(_ *kinesis.GetRecordsOutput, err error) bool {
			return kinesisx.ErrorCode(err) == kinesisx.CodeResourceNotFound
		}).
		WithDelayFunc(func(e failsafe.ExecutionAttempt[*kinesis.GetRecordsOutput]) time.Duration {
			switch err := e.LastError(); {
			case kinesisx.IsExpiredIterator(err):
				return 0 // renewed already; the pacing slot is the wait
			case !kinesisx.Retryable(err):
				// Trouble not known to pass (a denied role, a deleted
				// stream) is looked at again at the slowest pace.
				return bo.MaxInterval
			}
			return -1 // the backoff
		}).
		OnRetryScheduled(s.warnRetry).
		Build()
	s.exec = failsafe.With(p)
	return s
}

// NextAt is when the next GetRecords may be sent.
func (s *pollingSource) NextAt() time.Time { return s.nextAt }

// Close has nothing to release: an iterator simply expires.
func (s *pollingSource) Close() {}

// Next reads the next response of the shard.
func (s *pollingSource) Next(ctx context.Context) (SourceBatch, error) {
	s.warned = 0
	out, err := s.exec.WithContext(ctx).Get(func() (*kinesis.GetRecordsOutput, error) { return s.fetch(ctx) })
	if err != nil {
		if kinesisx.ErrorCode(err) == kinesisx.CodeResourceNotFound {
			return SourceBatch{}, fmt.Errorf("reading shard %s: %w: %w", s.shard, ErrShardNotFound, err)
		}
		return SourceBatch{}, err
	}
	b := SourceBatch{Records: out.Records, MillisBehindLatest: aws.ToInt64(out.MillisBehindLatest), ChildShards: out.ChildShards}
	if n := len(out.Records); n > 0 {
		s.from = after(aws.ToString(out.Records[n-1].SequenceNumber))
	}
	if out.NextShardIterator == nil {
		b.End = true
		return b, nil
	}
	s.iter = aws.ToString(out.NextShardIterator)
	if len(out.Records) == 0 && b.MillisBehindLatest == 0 {
		s.nextAt = s.answeredAt.Add(s.idle)
	}
	return b, nil
}

// fetch is one attempt: an iterator if there is none, then one GetRecords
// in its pacing slot.
func (s *pollingSource) fetch(ctx context.Context) (*kinesis.GetRecordsOutput, error) {
	if s.iter == "" {
		it, err := s.iterator(ctx)
		if err != nil {
			return nil, err
		}
		s.iter = it
	}
	if err := sleepUntil(ctx, s.nextAt); err != nil {
		return nil, err
	}
	in := &kinesis.GetRecordsInput{ShardIterator: aws.String(s.iter), Limit: aws.Int32(s.limit)}
	_, in.StreamARN = kinesisx.StreamRef(s.stream)
	// Each attempt is bounded: an answer that never comes (a half-open
	// connection) must not stall the shard, and the HTTP client has no
	// timeout of its own because a PutRecords of 5 MiB may need long.
	callCtx, cancel := context.WithTimeout(ctx, getRecordsTimeout)
	out, err := s.api.GetRecords(callCtx, in)
	cancel()
	// The next call is paced from this answer, not from when this call was
	// sent: then the calls arrive at Kinesis at least poll_interval apart
	// however their latencies vary, and the 5 reads/s/shard limit holds at
	// the service, not only at the client.
	s.answeredAt = time.Now()
	s.nextAt = s.answeredAt.Add(s.poll)
	if kinesisx.IsExpiredIterator(err) {
		s.onExpired()
		s.iter = ""
		s.log.Debug("Shard iterator expired; renewing it after the last delivered record")
	}
	return out, err
}

// iterator gets an iterator at s.from.
func (s *pollingSource) iterator(ctx context.Context) (string, error) {
	in := &kinesis.GetShardIteratorInput{ShardId: aws.String(s.shard), ShardIteratorType: s.from.iterType}
	in.StreamName, in.StreamARN = kinesisx.StreamRef(s.stream)
	switch s.from.iterType {
	case types.ShardIteratorTypeAfterSequenceNumber, types.ShardIteratorTypeAtSequenceNumber:
		in.StartingSequenceNumber = aws.String(s.from.sequence)
	case types.ShardIteratorTypeAtTimestamp:
		in.Timestamp = aws.Time(s.from.timestamp)
	}
	out, err := s.api.GetShardIterator(ctx, in)
	if err != nil {
		return "", fmt.Errorf("getting a %s iterator: %w", s.from.iterType, err)
	}
	return aws.ToString(out.ShardIterator), nil
}

// warnRetry logs a failing read: at once when the trouble is not known to
// pass, else once per warnEvery of retrying, as a single failed call of a
// shard read at its pace is routine.
func (s *pollingSource) warnRetry(e failsafe.ExecutionScheduledEvent[*kinesis.GetRecordsOutput]) {
	err := e.LastError()
	if kinesisx.IsExpiredIterator(err) {
		return
	}
	if kinesisx.Retryable(err) && e.ElapsedTime()-s.warned < s.warnEvery {
		return
	}
	s.warned = e.ElapsedTime()
	s.log.Warnf("Reading the shard failed; retrying in %v: %v", e.Delay.Round(time.Millisecond), err)
}

// sleepUntil waits for t, or returns ctx's error when it ends first.
func sleepUntil(ctx context.Context, t time.Time) error {
	d := time.Until(t)
	if d <= 0 {
		return ctx.Err()
	}
	timer := time.NewTimer(d)
	defer timer.Stop()
	select {
	case <-timer.C:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}
