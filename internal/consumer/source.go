package consumer

import (
	"cmp"
	"context"
	"errors"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/kinesis"
	"github.com/aws/aws-sdk-go-v2/service/kinesis/types"
	"github.com/failsafe-go/failsafe-go"
	"github.com/failsafe-go/failsafe-go/retrypolicy"
	"github.com/redpanda-data/benthos/v4/public/service"

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
// SourceBatch, the subscription renewed every five minutes (and after an
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
//   - Next reserves room in the input's byte budget (sourceRoom) right
//     before each call that returns records (a GetRecords; reading a
//     subscription's next event), and gives it back when that call fails:
//     no room is held while it gets an iterator, subscribes, or waits out
//     a backoff. A polling source asks for no more records than the room
//     granted holds. The room of a call that succeeded is the reader's to
//     settle. While Next waits for room, an ack or nack ends the wait: Next
//     returns errServeReader, and the reader calls it again once served.
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
	Next(ctx context.Context) (SourceBatch, error)
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

// SourceBatch is what one Next yields: one GetRecords response, or one
// event of a subscription.
type SourceBatch struct {
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

// startSpec says where a shard reader begins.
type startSpec struct {
	// closeUnread closes the shard without reading it: its checkpoint is
	// already SHARD_END (read to its end and committed; only the closed set
	// lacks it).
	closeUnread bool

	iterType  types.ShardIteratorType
	sequence  string
	timestamp time.Time
	// skipSub drops the sub-records of `sequence` up to and including this
	// index: a checkpoint inside a KPL aggregated record.
	skipSub    int64
	hasSkipSub bool

	// notBefore is the earliest first GetRecords: see firstRead.
	notBefore time.Time
}

// startingPosition is where a subscription starting at f begins.
func (f startSpec) startingPosition() *types.StartingPosition {
	pos := &types.StartingPosition{Type: f.iterType}
	switch f.iterType {
	case types.ShardIteratorTypeAfterSequenceNumber, types.ShardIteratorTypeAtSequenceNumber:
		pos.SequenceNumber = aws.String(f.sequence)
	case types.ShardIteratorTypeAtTimestamp:
		pos.Timestamp = aws.Time(f.timestamp)
	}
	return pos
}

// iteratorInput asks for an iterator of a shard of stream (a name or an
// ARN) at f.
func (f startSpec) iteratorInput(stream, shard string) *kinesis.GetShardIteratorInput {
	pos := f.startingPosition()
	in := &kinesis.GetShardIteratorInput{
		ShardId: aws.String(shard), ShardIteratorType: pos.Type,
		StartingSequenceNumber: pos.SequenceNumber, Timestamp: pos.Timestamp,
	}
	in.StreamName, in.StreamARN = kinesisx.StreamRef(stream)
	return in
}

// after is the start right after a record.
func after(sequence string) startSpec {
	return startSpec{iterType: types.ShardIteratorTypeAfterSequenceNumber, sequence: sequence}
}

// newSource opens the record source of a shard: a subscription with
// enhanced fan-out, else GetRecords polling.
func (co *coordinator) newSource(shard string, from startSpec, log *service.Logger, budget *shardBudget) RecordSource {
	if co.fanOut == nil {
		s := newPollingSource(co, shard, from, log)
		s.room = budget
		return s
	}
	api := co.api.(FanOutAPI)
	opts := []func(*kinesis.Options){ownEventDecoder}
	if co.c.cfg.EnhancedFanOut.NoInitialResponse {
		opts = append(opts, WithoutInitialResponse)
	}
	subscribe := func(ctx context.Context, in *kinesis.SubscribeToShardInput) (eventStream, error) {
		out, err := api.SubscribeToShard(ctx, in, opts...)
		if err != nil {
			return nil, err
		}
		return out.GetStream(), nil
	}
	s := newSubscriptionSource(co, subscribe, shard, from, log)
	s.room = budget
	return s
}

// sourceRoom is a record source's hold on the input's byte budget
// (budget_shard.go): room is reserved right before each call that returns
// records and given back when that call fails, so a shard that is not
// reading holds none.
type sourceRoom interface {
	// reserve waits for room for the next call, unless the source holds
	// it already. It returns errServeReader when the reader has acks or
	// nacks to serve first (Next then returns that error), or ctx's error.
	reserve(ctx context.Context) error
	// giveBack returns the room held: the call failed.
	giveBack()
	// callLimit is the GetRecords Limit the room holds.
	callLimit() int32
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
