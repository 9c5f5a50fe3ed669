package source

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/kinesis"
	"github.com/failsafe-go/failsafe-go"
	"github.com/redpanda-data/benthos/v4/public/service"

	"github.com/connect-kinesis/connect-kinesis/internal/consumer"
	"github.com/connect-kinesis/connect-kinesis/internal/kinesisx"
)

// getRecordsTimeout bounds one GetRecords attempt. A response is at most
// 10 MiB; 20 seconds is far beyond what that takes on a working link.
const getRecordsTimeout = 20 * time.Second

// getRecordsStall bounds how long one GetRecords attempt may go with
// nothing of its answer arriving (its headers, then each part of its
// body). Kinesis starts an answer well within a second, and an answer
// that is coming keeps arriving; a call that hangs (a half-open
// connection, an answer stopped mid-body) holds its room in the byte
// budget, so it is given up after this bound rather than the whole
// getRecordsTimeout.
const getRecordsStall = 5 * time.Second

// pollingSource is the RecordSource of GetRecords polling. It gets an
// iterator where it was told to start, then reads with GetRecords: the first
// call no sooner than poll_interval after the shard's previous lease ended,
// each next one at least poll_interval after the previous answer
// (idle_poll_interval after an empty answer at the tip). An expired iterator
// is renewed after the last record returned. Every failure is retried by one
// failsafe-go policy built with the source, until the reader stops.
type pollingSource struct {
	api        consumer.KinesisAPI
	stream     string // as configured: a name or an ARN
	shard      string
	limit      int32
	poll, idle time.Duration
	log        *service.Logger
	onExpired  func()
	onAnswer   func(time.Time) // told when each GetRecords was answered
	// room is the shard's part of the input's byte budget: reserved right
	// before each GetRecords, given back when it fails, and its Limit
	// fewer records than `limit` when the room granted holds fewer.
	room Room
	// stallAfter is getRecordsStall (a test's shorter bound).
	stallAfter time.Duration
	// callLimit is the most records a call asks for now: limit, or less
	// after a call stalled (shrinkAfterStall), and answered is how many
	// calls were answered since it last changed.
	callLimit int32
	answered  int

	exec failsafe.Executor[*kinesis.GetRecordsOutput]
	warn warnPacer

	from       Start     // where the next iterator starts
	iter       string    // empty until got, and again once it expired
	answeredAt time.Time // when the last GetRecords was answered
	nextAt     time.Time // the earliest moment of the next GetRecords
}

func newPollingSource(p Params) *pollingSource {
	cfg := p.Config
	s := &pollingSource{
		api:        p.API,
		stream:     p.Stream,
		shard:      p.Shard,
		limit:      int32(cfg.Limit),
		poll:       cfg.PollInterval,
		idle:       cfg.IdlePollInterval,
		log:        p.Log,
		onExpired:  p.OnExpired,
		onAnswer:   p.OnAnswer,
		warn:       newWarnPacer(cfg.Backoff),
		from:       p.From,
		room:       p.Room,
		stallAfter: getRecordsStall,
		callLimit:  int32(cfg.Limit),
		// The first call waits as the take said, so the shard's calls
		// stay poll_interval apart across a change of reader.
		nextAt: p.From.NotBefore,
	}
	// Reading a shard is retried until the reader stops: a shard is never
	// given up. Retries back off from at least poll_interval; each attempt
	// also waits for its pacing slot, so however the jittered delays fall,
	// calls reach Kinesis at least poll_interval apart.
	policy := sourceRetry(cfg.Backoff, cfg.PollInterval, pollDelay, s.warnRetry).
		// A shard or stream that does not exist is the reader's to judge
		// (trimmed, or deleted), not a failure to retry blindly.
		AbortIf(func(_ *kinesis.GetRecordsOutput, err error) bool {
			return kinesisx.ErrorCode(err) == kinesisx.CodeResourceNotFound || errors.As(err, new(roomError))
		}).
		Build()
	s.exec = failsafe.With(policy)
	return s
}

// pollDelay is the wait before reading again after err (-1: the backoff).
func pollDelay(err error, slowest time.Duration) time.Duration {
	switch {
	case kinesisx.IsExpiredIterator(err):
		return 0 // renewed already; the pacing slot is the wait
	case !kinesisx.Retryable(err):
		// Trouble not known to pass (a denied role, a deleted stream) is
		// looked at again at the slowest pace.
		return slowest
	}
	return -1
}

// NextAt is when the next GetRecords may be sent.
func (s *pollingSource) NextAt() time.Time { return s.nextAt }

// Close has nothing to release: an iterator simply expires.
func (s *pollingSource) Close() {}

// Next reads the next response of the shard.
func (s *pollingSource) Next(ctx context.Context) (Batch, error) {
	s.warn.reset()
	out, err := s.exec.WithContext(ctx).Get(func() (*kinesis.GetRecordsOutput, error) { return s.fetch(ctx) })
	if err != nil {
		if kinesisx.ErrorCode(err) == kinesisx.CodeResourceNotFound {
			// If the reader calls again (the shard is still listed), it
			// starts from a new iterator after the last record returned.
			s.iter = ""
			return Batch{}, fmt.Errorf("reading shard %s: %w: %w", s.shard, ErrShardNotFound, err)
		}
		if re := (roomError{}); errors.As(err, &re) {
			return Batch{}, re.err
		}
		return Batch{}, err
	}
	b := Batch{Records: out.Records, MillisBehindLatest: aws.ToInt64(out.MillisBehindLatest), ChildShards: out.ChildShards}
	if n := len(out.Records); n > 0 {
		s.from = After(aws.ToString(out.Records[n-1].SequenceNumber))
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
	// Room is reserved only now, with an iterator in hand and the pacing
	// slot come, and given back if the call fails: a shard whose calls
	// fail, or that waits out a backoff, holds none.
	if err := s.room.Reserve(ctx); err != nil {
		return nil, roomError{err}
	}
	limit := min(s.callLimit, s.room.CallLimit())
	in := &kinesis.GetRecordsInput{ShardIterator: aws.String(s.iter), Limit: aws.Int32(limit)}
	_, in.StreamARN = kinesisx.StreamRef(s.stream)
	// Each attempt is bounded: an answer that never comes (a half-open
	// connection) must not stall the shard, and the HTTP client has no
	// timeout of its own because a PutRecords of 5 MiB may need long. An
	// attempt with nothing arriving is given up sooner (getRecordsStall),
	// as it holds the shard's room while it waits.
	callCtx, cancel := context.WithTimeout(ctx, getRecordsTimeout)
	guard := kinesisx.NewStallGuard(callCtx, s.stallAfter)
	out, err := s.api.GetRecords(guard.Context(), in, kinesisx.WithRecordsCodec, guard.Option)
	err = guard.Done(err)
	cancel()
	// The next call is paced from this answer, not from when this call was
	// sent: then the calls arrive at Kinesis at least poll_interval apart
	// however their latencies vary, and the 5 reads/s/shard limit holds at
	// the service, not only at the client.
	s.answeredAt = time.Now()
	s.nextAt = s.answeredAt.Add(s.poll)
	s.onAnswer(s.answeredAt)
	if err != nil {
		s.room.GiveBack()
	}
	s.adjustLimit(limit, err)
	if kinesisx.IsExpiredIterator(err) {
		s.onExpired()
		s.iter = ""
		s.log.Debug("Shard iterator expired; renewing it after the last delivered record")
	}
	return out, err
}

// minStalledLimit is the fewest records a call asks for after stalls, and
// growAfter how many answered calls in a row let the limit double again.
const (
	minStalledLimit = 100
	growAfter       = 10
)

// adjustLimit sets how many records the next call asks for, after a call
// that asked for limit ended with err. A call given up by the stall guard
// is sent again at half its limit (down to minStalledLimit): an emulator
// or a loaded service may take longer than the stall bound to gather a
// large answer before its first byte, and sent again at the same limit
// the call would stall forever. After growAfter answers in a row the limit
// doubles, up to `limit`, so a passing slowness costs throughput only for
// a while.
func (s *pollingSource) adjustLimit(limit int32, err error) {
	switch {
	case errors.Is(err, kinesisx.ErrStalled):
		next := max(min(s.limit, minStalledLimit), limit/2)
		if next < s.callLimit {
			s.log.Debugf("GetRecords of shard %s at limit %d gave no answer within %v; asking for %d records next", s.shard, limit, s.stallAfter, next)
			s.callLimit = next
		}
		s.answered = 0
	case err == nil && s.callLimit < s.limit:
		s.answered++
		if s.answered >= growAfter {
			s.callLimit, s.answered = min(s.limit, 2*s.callLimit), 0
			s.log.Debugf("GetRecords of shard %s answered %d calls in a row; asking for up to %d records again", s.shard, growAfter, s.callLimit)
		}
	}
}

// iterator gets an iterator at s.from.
func (s *pollingSource) iterator(ctx context.Context) (string, error) {
	out, err := s.api.GetShardIterator(ctx, s.from.iteratorInput(s.stream, s.shard))
	if err != nil {
		return "", fmt.Errorf("getting a %s iterator: %w", s.from.IterType, err)
	}
	return aws.ToString(out.ShardIterator), nil
}

// warnRetry logs a failing read, paced by warnPacer; an expired iterator
// is routine and renewed at once, so it is not logged.
func (s *pollingSource) warnRetry(e failsafe.ExecutionScheduledEvent[*kinesis.GetRecordsOutput]) {
	err := e.LastError()
	if kinesisx.IsExpiredIterator(err) || !s.warn.due(kinesisx.Retryable(err), e.ElapsedTime()) {
		return
	}
	if s.iter == "" && s.from.Sequence != "" && kinesisx.IsUnknownSequence(err) {
		LogUnknownCheckpoint(s.log, s.shard, e.Delay, err)
		return
	}
	s.log.Warnf("Reading the shard failed; retrying in %v: %v", e.Delay.Round(time.Millisecond), err)
}

// LogUnknownCheckpoint says, as an ERROR naming the shard and the fix, that
// Kinesis has no record at the position a shard starts from: a checkpoint
// of another stream (an import from the wrong source) or of a stream
// deleted and created again. Retrying never helps; the operator must act.
func LogUnknownCheckpoint(log *service.Logger, shard string, retryIn time.Duration, err error) {
	log.Errorf("Shard %s cannot be read: Kinesis has no record at its checkpoint in this shard, so the checkpoint belongs to another stream "+
		"(imported from the wrong source?) or to a stream deleted and created again. The shard stays unread until the group's checkpoints are fixed: "+
		"`connect-kinesis checkpoints import` again from the right source, or `connect-kinesis checkpoints reset`. Retrying in %v: %v",
		shard, retryIn.Round(time.Millisecond), err)
}
