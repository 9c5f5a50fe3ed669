package source

import (
	"cmp"
	"context"
	"errors"
	"math"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/kinesis"
	"github.com/aws/aws-sdk-go-v2/service/kinesis/types"
	"github.com/failsafe-go/failsafe-go"
	"github.com/failsafe-go/failsafe-go/retrypolicy"
	"github.com/redpanda-data/benthos/v4/public/service"

	"github.com/connect-kinesis/connect-kinesis/internal/consumer"
	"github.com/connect-kinesis/connect-kinesis/internal/kinesisx"
)

// A shard reader is two halves joined at one seam.
//
// A RecordSource fetches: it yields the records of one shard in sequence
// order, starting where it was told to (the shard's checkpoint, or the
// group's start position), and says when the shard has ended and which
// shards are its children. It owns everything about talking to Kinesis for
// that shard: pacing, retries with backoff (failsafe-go), and resuming after
// trouble. Polling (pollingSource: GetShardIterator, then GetRecords at most
// once per poll_interval, renewing an expired iterator) is one source.
// Enhanced fan-out (subscriptionSource) is the other: SubscribeToShard
// through the stream's consumer from the same start, each event a
// Batch, the subscription renewed every five minutes (and after an
// error, a silence or a pause) from its continuation sequence, ChildShards
// taken from the last event.
//
// The shardReader is the path every source shares: it turns records into
// user records (KPL de-aggregation, skipping what a checkpoint inside an
// aggregate already covers, dropping stray aggregates outside the shard's
// hash key range), hands them to Benthos, follows acks in the
// tracker, redelivers nacked batches, commits the contiguously acked
// position, and at the end closes the shard or releases its lease.
//
// The contract between the two:
//   - The reader calls Next only when the shard has room for another batch
//     (shard_max_in_flight; with lanes, while fewer than `limit` fetched
//     records wait in them), and delivers everything Next returned before
//     calling it again, or with lanes keeps it queued for delivery. So
//     "after the last record returned" is "after the last record the
//     reader holds": that is where a source resumes when it must start
//     over (an expired iterator, a subscription renewed or broken).
//   - Next reserves room in the input's byte budget (Room) right
//     before each call that returns records (a GetRecords; reading a
//     subscription's next event), and gives it back when that call fails:
//     no room is held while it gets an iterator, subscribes, or waits out
//     a backoff. A polling source asks for no more records than the room
//     granted holds. The room of a call that succeeded is the reader's to
//     settle. While Next waits for room, an ack or nack ends the wait: Next
//     returns the budget's ErrServeReader, and the reader calls it again
//     once served.
//   - Next blocks until it has a batch, or ctx ends; it retries its own
//     trouble and returns an error only when ctx ends, or an error wrapping
//     ErrShardNotFound when Kinesis says the shard or its stream does not
//     exist (for a subscription: when its stream consumer is there; a
//     consumer gone is registered again by the source). The reader then
//     tells a trimmed shard (no longer listed: it counts as closed) from a
//     deleted stream (its readers stop) and from a stream recreated since
//     the last listing (its readers stop, and its state is cleared), and
//     may call Next again when the shard is still listed.
//   - NextAt says when a pulling source will next call Kinesis. The reader
//     waits for that moment itself, so that acks and redeliveries are served
//     while it waits; a pushing source returns the zero time.
//   - A batch with End set is the last one: the shard is closed and every
//     record was returned. Next is not called again.
type RecordSource interface {
	Next(ctx context.Context) (Batch, error)
	NextAt() time.Time
	// Close releases what the source holds (a subscription, a
	// connection). It is called once, when the reader stops reading.
	Close()
}

// ErrShardNotFound is wrapped by the error of a Next that Kinesis answered
// with ResourceNotFound (and, for a subscription, whose stream consumer
// exists): the shard was trimmed past the retention period, or the stream
// was deleted.
var ErrShardNotFound = errors.New("shard or stream not found")

// Batch is what one Next yields: one GetRecords response, or one
// event of a subscription.
type Batch struct {
	// Records are in sequence order; they may be empty.
	Records []types.Record
	// MillisBehindLatest is how far the shard's tip is ahead of Records.
	MillisBehindLatest int64
	// End is set when the shard is closed and read to its end.
	End bool
	// ChildShards are the shards that continue this one, set with End
	// (when the service reports them).
	ChildShards []types.ChildShard
}

// Start says where a shard reader begins.
type Start struct {
	// CloseUnread closes the shard without reading it: its checkpoint is
	// already SHARD_END (read to its end and committed; only the closed set
	// lacks it).
	CloseUnread bool

	IterType  types.ShardIteratorType
	Sequence  string
	Timestamp time.Time
	// SkipSub drops the sub-records of Sequence up to and including this
	// index: a checkpoint inside a KPL aggregated record.
	SkipSub    int64
	HasSkipSub bool

	// NotBefore is the earliest first GetRecords: the shard's calls stay
	// poll_interval apart across a change of reader.
	NotBefore time.Time

	// DeliveredBefore is the redelivery mark the take read (Take.Delivered),
	// for the reader: the records at or below it are delivered marked. The
	// source does not use it.
	DeliveredBefore consumer.Position
}

// startingPosition is where a subscription starting at f begins.
func (f Start) startingPosition() *types.StartingPosition {
	pos := &types.StartingPosition{Type: f.IterType}
	switch f.IterType {
	case types.ShardIteratorTypeAfterSequenceNumber, types.ShardIteratorTypeAtSequenceNumber:
		pos.SequenceNumber = aws.String(f.Sequence)
	case types.ShardIteratorTypeAtTimestamp:
		pos.Timestamp = aws.Time(f.Timestamp)
	}
	return pos
}

// iteratorInput asks for an iterator of a shard of stream (a name or an
// ARN) at f.
func (f Start) iteratorInput(stream, shard string) *kinesis.GetShardIteratorInput {
	pos := f.startingPosition()
	in := &kinesis.GetShardIteratorInput{
		ShardId: aws.String(shard), ShardIteratorType: pos.Type,
		StartingSequenceNumber: pos.SequenceNumber, Timestamp: pos.Timestamp,
	}
	in.StreamName, in.StreamARN = kinesisx.StreamRef(stream)
	return in
}

// After is the start right after a record.
func After(sequence string) Start {
	return Start{IterType: types.ShardIteratorTypeAfterSequenceNumber, Sequence: sequence}
}

// Room is a record source's hold on the input's byte budget: room is
// reserved right before each call that returns records and given back when
// that call fails, so a shard that is not reading holds none. The budget's
// Shard is one; a source without a budget has noRoom.
type Room interface {
	// Reserve waits for room for the next call, unless the source holds
	// it already. Its error (the reader has acks or nacks to serve first,
	// or ctx ended) is what Next returns.
	Reserve(ctx context.Context) error
	// GiveBack returns the room held: the call failed.
	GiveBack()
	// Subscribed says a subscription was opened: its first event may
	// carry a backlog, so the next reservation is for a full event.
	Subscribed()
	// CallLimit is the GetRecords Limit the room holds.
	CallLimit() int32
}

// noRoom is the Room of a source read without a byte budget.
type noRoom struct{}

func (noRoom) Reserve(context.Context) error { return nil }
func (noRoom) GiveBack()                     {}
func (noRoom) Subscribed()                   {}
func (noRoom) CallLimit() int32              { return math.MaxInt32 }

// roomError carries a Reserve's error through the polling retry policy,
// which must not retry it.
type roomError struct{ err error }

func (e roomError) Error() string { return e.err.Error() }
func (e roomError) Unwrap() error { return e.err }

// Params is what a record source needs of its shard and stream.
type Params struct {
	API consumer.KinesisAPI
	// Stream is the stream as configured: a name or an ARN.
	Stream string
	Shard  string
	From   Start
	Config *consumer.Config
	Log    *service.Logger
	// Room is the shard's part of the byte budget; nil: none.
	Room Room
	// OnExpired hears of each expired iterator; OnAnswer of when each
	// GetRecords was answered. Either may be nil.
	OnExpired func()
	OnAnswer  func(time.Time)
	// PausedAfter is how long a subscription may go unread before it is
	// cancelled (pausedLimit when 0).
	PausedAfter time.Duration
}

// New opens the record source of a shard: a subscription through sc with
// enhanced fan-out (p.API is then a consumer.FanOutAPI), else GetRecords
// polling (sc nil).
func New(p Params, sc *StreamConsumer) RecordSource {
	if p.Room == nil {
		p.Room = noRoom{}
	}
	if p.OnExpired == nil {
		p.OnExpired = func() {}
	}
	if p.OnAnswer == nil {
		p.OnAnswer = func(time.Time) {}
	}
	if sc == nil {
		return newPollingSource(p)
	}
	api := p.API.(consumer.FanOutAPI)
	opts := []func(*kinesis.Options){OwnEventDecoder}
	if p.Config.EnhancedFanOut.NoInitialResponse {
		opts = append(opts, WithoutInitialResponse)
	}
	subscribe := func(ctx context.Context, in *kinesis.SubscribeToShardInput) (EventStream, error) {
		out, err := api.SubscribeToShard(ctx, in, opts...)
		if err != nil {
			return nil, err
		}
		return out.GetStream(), nil
	}
	return newSubscriptionSource(p, sc, subscribe)
}

// NewSubscription is the enhanced fan-out source of a shard that
// subscribes with subscribe: another transport, or a test's script.
func NewSubscription(p Params, sc *StreamConsumer, subscribe SubscribeFunc) RecordSource {
	if p.Room == nil {
		p.Room = noRoom{}
	}
	return newSubscriptionSource(p, sc, subscribe)
}

// sourceRetry starts the retry policy of a record source: every failure is
// retried until the reader stops (no bound on attempts or time), backing off
// from at least floor. delay picks the wait after an error (-1: the
// backoff), given the slowest pace (the backoff's longest interval); warn
// hears of every retry scheduled.
func sourceRetry[R any](bo kinesisx.Backoff, floor time.Duration, delay func(err error, slowest time.Duration) time.Duration, warn func(failsafe.ExecutionScheduledEvent[R])) retrypolicy.Builder[R] {
	bo.InitialInterval = max(bo.InitialInterval, floor)
	bo.MaxInterval = max(bo.MaxInterval, bo.InitialInterval)
	bo.MaxRetries, bo.MaxElapsedTime = 0, 0
	return kinesisx.RetryBuilder[R](bo).
		HandleIf(func(_ R, err error) bool { return err != nil }).
		WithDelayFunc(func(e failsafe.ExecutionAttempt[R]) time.Duration { return delay(e.LastError(), bo.MaxInterval) }).
		OnRetryScheduled(warn)
}

// defaultWarnEvery spaces the warnings of a shard that keeps failing when
// backoff.max_elapsed_time is 0 (no bound).
const defaultWarnEvery = 30 * time.Second

// warnPacer spaces the warnings of one source call that keeps failing:
// trouble not known to pass is logged at every retry, known trouble once
// per backoff.max_elapsed_time (else defaultWarnEvery) of retrying, as a
// single failed call of a shard read at its pace is routine.
type warnPacer struct {
	every  time.Duration
	warned time.Duration // the elapsed time of the last warning
}

func newWarnPacer(bo kinesisx.Backoff) warnPacer {
	return warnPacer{every: cmp.Or(bo.MaxElapsedTime, defaultWarnEvery)}
}

// reset starts a new call.
func (w *warnPacer) reset() { w.warned = 0 }

// due reports whether the retry of a call failing for elapsed is to be
// logged; known says the trouble is known to pass.
func (w *warnPacer) due(known bool, elapsed time.Duration) bool {
	if known && elapsed-w.warned < w.every {
		return false
	}
	w.warned = elapsed
	return true
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
