package consumer

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/kinesis"
	"github.com/aws/aws-sdk-go-v2/service/kinesis/types"
	"github.com/failsafe-go/failsafe-go"
	"github.com/redpanda-data/benthos/v4/public/service"

	"github.com/connect-kinesis/connect-kinesis/internal/kinesisx"
	"github.com/connect-kinesis/connect-kinesis/internal/kpl"
)

// lagLogInterval rate-limits the lag warnings of one shard.
const lagLogInterval = time.Minute

// startSpec says where a reader begins.
type startSpec struct {
	iterType  types.ShardIteratorType
	sequence  string
	timestamp time.Time
	// skipSub drops the sub-records of `sequence` up to and including this
	// index: a checkpoint inside a KPL aggregated record.
	skipSub    int64
	hasSkipSub bool
	// skipClose closes the shard without reading it: `latest` on a shard
	// that was already closed when first seen.
	skipClose bool
}

// shardReader reads one leased shard and follows its batches to ack.
type shardReader struct {
	co      *coordinator
	shard   Shard
	lease   atomic.Pointer[Lease]
	tracker *tracker
	start   startSpec
	log     *service.Logger

	// ctx ends the reader at once (lease lost, or shutdown out of time).
	ctx    context.Context
	cancel context.CancelFunc
	// fetchCtx also ends when the reader is asked to stop fetching
	// (hand-off, shutdown); the reader then drains acks and commits.
	fetchCtx    context.Context
	cancelFetch context.CancelFunc
	stopping    atomic.Bool
	lost        atomic.Bool
	// releasing is set just before the lease is released or the shard
	// closed: renewals leave the lease alone from then on, so one racing
	// with the release does not report it lost.
	releasing   atomic.Bool
	done        chan struct{}
	closedShard bool // written before done is closed

	redeliverMu sync.Mutex
	redeliver   []*Batch

	commitMu     sync.Mutex
	committedGen uint64

	lastDelivered string
	lastLagLog    time.Time
}

func newShardReader(co *coordinator, shard Shard, l Lease, start startSpec) *shardReader {
	r := &shardReader{
		co:      co,
		shard:   shard,
		tracker: newTracker(),
		start:   start,
		log:     co.log.With("shard", shard.ID),
		done:    make(chan struct{}),
	}
	r.lease.Store(&l)
	r.ctx, r.cancel = context.WithCancel(co.runCtx)
	r.fetchCtx, r.cancelFetch = context.WithCancel(r.ctx)
	return r
}

// stop asks the reader to stop fetching, wait for its in-flight batches
// (up to the hand-off timeout), commit and release its lease.
func (r *shardReader) stop() {
	r.stopping.Store(true)
	r.cancelFetch()
}

// markLost ends the reader at once; it commits nothing more.
func (r *shardReader) markLost() {
	r.lost.Store(true)
	r.stopping.Store(true)
	r.cancel()
}

func (r *shardReader) nack(b *Batch) {
	if !r.co.c.cfg.RedeliverNacks {
		// Benthos replays nacked batches itself; the batch stays pending
		// so no checkpoint passes it until it is finally acked.
		return
	}
	r.redeliverMu.Lock()
	r.redeliver = append(r.redeliver, b)
	r.redeliverMu.Unlock()
	r.tracker.signal()
}

func (r *shardReader) popRedeliver() *Batch {
	r.redeliverMu.Lock()
	defer r.redeliverMu.Unlock()
	if len(r.redeliver) == 0 {
		return nil
	}
	b := r.redeliver[0]
	r.redeliver = r.redeliver[1:]
	return b
}

func (r *shardReader) hasRedeliver() bool {
	r.redeliverMu.Lock()
	defer r.redeliverMu.Unlock()
	return len(r.redeliver) > 0
}

func (r *shardReader) run() {
	defer close(r.done)
	defer r.cancel()
	commitStop := make(chan struct{})
	commitDone := make(chan struct{})
	go r.commitLoop(commitStop, commitDone)
	ended := r.fetchLoop()
	close(commitStop)
	<-commitDone
	if r.lost.Load() {
		r.log.Warn("Lease lost; stopped reading the shard without committing")
		return
	}
	store := r.co.store
	if ended {
		// Every record is delivered and acked: close the shard atomically
		// (checkpoint SHARD_END, closed set, lease released), which opens
		// the gate for its children.
		r.releasing.Store(true)
		err := r.storeRetry(func(ctx context.Context) error { return store.CloseShard(ctx, *r.lease.Load()) })
		if err == nil {
			r.closedShard = true
			r.log.Debug("Shard read to its end and closed")
			return
		}
		r.log.Warnf("Closing the shard failed: %v", err)
		return
	}
	// Stopping for a hand-off or shutdown: wait for in-flight batches, then
	// commit and release so the next owner starts right after them.
	r.waitAcked(r.co.c.cfg.HandoffTimeout)
	if err := r.commit(r.ctx); err != nil {
		if errors.Is(err, ErrLeaseLost) {
			return
		}
	}
	r.releasing.Store(true)
	err := r.storeRetry(func(ctx context.Context) error { return store.Release(ctx, *r.lease.Load()) })
	if err != nil && !errors.Is(err, ErrLeaseLost) {
		r.log.Warnf("Releasing the lease failed; it frees itself after lease.period: %v", err)
	}
}

// storeRetry runs a store mutation with backoff until it succeeds, the
// lease is lost, or the reader is ended.
func (r *shardReader) storeRetry(fn func(ctx context.Context) error) error {
	p := kinesisx.RetryBuilder[any](r.co.c.cfg.Backoff).
		HandleIf(func(_ any, err error) bool {
			return err != nil && !errors.Is(err, ErrLeaseLost) && !errors.Is(err, ErrLeaseHeld)
		}).Build()
	err := failsafe.With[any](p).WithContext(r.ctx).Run(func() error { return fn(r.ctx) })
	if errors.Is(err, ErrLeaseLost) {
		r.co.c.metrics.lost.Incr(1, r.co.streamName)
		r.markLost()
	}
	return err
}

// waitAcked waits until every delivered batch is acked, the timeout passes
// or the reader ends. Nacked batches waiting for redelivery will not be
// acked now, so waiting for them is pointless.
func (r *shardReader) waitAcked(timeout time.Duration) {
	t := time.NewTimer(timeout)
	defer t.Stop()
	for r.tracker.pending() > 0 && !r.hasRedeliver() {
		select {
		case <-r.tracker.notify:
		case <-t.C:
			r.log.Warnf("Stopped waiting for %d in-flight batches after %v; they may be delivered again", r.tracker.pending(), timeout)
			return
		case <-r.ctx.Done():
			return
		}
	}
}

func (r *shardReader) commitLoop(stop, done chan struct{}) {
	defer close(done)
	t := time.NewTicker(r.co.c.cfg.CommitPeriod)
	defer t.Stop()
	for {
		select {
		case <-t.C:
			_ = r.commit(r.ctx)
		case <-stop:
			return
		case <-r.ctx.Done():
			return
		}
	}
}

// commit writes the highest contiguously acked position if it moved. A
// fenced commit means the lease is gone: the reader stops at once.
func (r *shardReader) commit(ctx context.Context) error {
	r.commitMu.Lock()
	defer r.commitMu.Unlock()
	if r.lost.Load() {
		return ErrLeaseLost
	}
	pos, gen, ok := r.tracker.checkpoint()
	if !ok || gen == r.committedGen {
		return nil
	}
	err := r.co.store.Commit(ctx, *r.lease.Load(), pos)
	switch {
	case errors.Is(err, ErrLeaseLost):
		r.co.c.metrics.lost.Incr(1, r.co.streamName)
		r.markLost()
		return err
	case err != nil:
		r.log.Warnf("Committing checkpoint %s failed; retrying next period: %v", pos.Sequence, err)
		return err
	}
	r.committedGen = gen
	return nil
}

// fetchLoop reads until the shard ends and every batch is acked (true), or
// until the reader is stopped or ended (false).
func (r *shardReader) fetchLoop() bool {
	cfg := &r.co.c.cfg
	ctx := r.fetchCtx
	if r.start.skipClose {
		return true
	}
	iter, err := r.iterator(ctx, r.start)
	if err != nil {
		return false
	}
	var next time.Time
	ended := false
	for {
		if ctx.Err() != nil {
			return false
		}
		if b := r.popRedeliver(); b != nil {
			if !r.redeliverBatch(ctx, b) {
				return false
			}
			continue
		}
		if ended {
			if r.tracker.pending() == 0 {
				return true
			}
			if !r.wait(ctx, nil) {
				return false
			}
			continue
		}
		if r.tracker.pending() >= cfg.ShardMaxInFlight {
			if !r.wait(ctx, nil) {
				return false
			}
			continue
		}
		if d := time.Until(next); d > 0 {
			t := time.NewTimer(d)
			ok := r.wait(ctx, t.C)
			t.Stop()
			if !ok {
				return false
			}
			continue
		}
		out, err := r.getRecords(ctx, iter)
		// The next call is paced from this answer, not from when this call
		// was sent: then the calls arrive at Kinesis at least poll_interval
		// apart however their latencies vary, and the 5 reads/s/shard limit
		// holds at the service, not only at the client.
		answered := time.Now()
		next = answered.Add(cfg.PollInterval)
		if err != nil {
			if ctx.Err() != nil {
				return false
			}
			if kinesisx.IsExpiredIterator(err) {
				r.co.c.metrics.expired.Incr(1, r.co.streamName)
				spec := r.start
				if r.lastDelivered != "" {
					spec = startSpec{iterType: types.ShardIteratorTypeAfterSequenceNumber, sequence: r.lastDelivered}
				}
				r.log.Debug("Shard iterator expired; renewing it after the last delivered record")
				if iter, err = r.iterator(ctx, spec); err != nil {
					return false
				}
				continue
			}
			r.log.Warnf("Reading the shard failed; retrying: %v", err)
			next = time.Now().Add(cfg.Backoff.MaxInterval)
			continue
		}
		recs := r.convert(out.Records)
		behind := aws.ToInt64(out.MillisBehindLatest)
		r.lag(behind)
		if len(recs) > 0 {
			if !r.deliver(ctx, recs, behind) {
				return false
			}
		}
		if out.NextShardIterator == nil {
			ended = true
			r.co.shardEnded()
			continue
		}
		iter = aws.ToString(out.NextShardIterator)
		if len(out.Records) == 0 && behind == 0 {
			next = answered.Add(cfg.IdlePollInterval)
		}
	}
}

// errNacked stands for the nack that queued a batch for redelivery.
var errNacked = errors.New("batch nacked by the pipeline")

// redeliverBatch sends a nacked batch again, and again, with backoff
// between attempts (the first wait is for the nack that queued it), until
// the pipeline acks it: a record is never skipped. It returns false when
// the reader stops; a batch not in the pipeline then goes back to the
// queue so that no one waits for its ack.
func (r *shardReader) redeliverBatch(ctx context.Context, b *Batch) bool {
	bo := r.co.c.cfg.Backoff
	bo.MaxRetries, bo.MaxElapsedTime = 0, 0
	p := kinesisx.RetryBuilder[any](bo).
		HandleIf(func(_ any, err error) bool { return err != nil && ctx.Err() == nil }).
		Build()
	if b.verdict == nil {
		b.verdict = make(chan error, 1)
	}
	b.redelivering.Store(true)
	defer b.redelivering.Store(false)
	first := true
	inPipeline := false
	err := failsafe.With[any](p).WithContext(ctx).Run(func() error {
		if first {
			first = false
			return errNacked
		}
		select {
		case <-b.verdict: // drop a stale verdict
		default:
		}
		select {
		case r.co.c.out <- b:
			inPipeline = true
		case <-ctx.Done():
			return ctx.Err()
		}
		select {
		case err := <-b.verdict:
			inPipeline = false
			return err
		case <-ctx.Done():
			return ctx.Err()
		}
	})
	if err == nil {
		return true
	}
	if !inPipeline {
		r.redeliverMu.Lock()
		r.redeliver = append([]*Batch{b}, r.redeliver...)
		r.redeliverMu.Unlock()
	}
	return false
}

// wait blocks until an ack or nack arrives, the optional timer fires, or
// ctx ends (false).
func (r *shardReader) wait(ctx context.Context, timer <-chan time.Time) bool {
	select {
	case <-r.tracker.notify:
		return true
	case <-timer:
		return true
	case <-ctx.Done():
		return false
	}
}

func (r *shardReader) deliver(ctx context.Context, recs []Record, behind int64) bool {
	last := recs[len(recs)-1].Sequence
	b := &Batch{Stream: r.co.streamName, Shard: r.shard.ID, Records: recs, MillisBehind: behind, reader: r}
	b.id = r.tracker.add(Position{Sequence: last})
	select {
	case r.co.c.out <- b:
	case <-ctx.Done():
		r.tracker.drop(b.id)
		return false
	}
	r.lastDelivered = last
	var n int64
	for _, rec := range recs {
		n += int64(len(rec.Data))
	}
	r.co.c.metrics.records.Incr(int64(len(recs)), r.co.streamName)
	r.co.c.metrics.bytes.Incr(n, r.co.streamName)
	return true
}

// convert turns Kinesis records into user records, splitting KPL
// aggregates when configured.
//
// A checkpoint inside an aggregate resumes AT its sequence number; the
// sub-records up to the checkpoint are dropped. That sequence number occurs
// once in a shard, so the check needs no notion of "first response".
func (r *shardReader) convert(in []types.Record) []Record {
	out := make([]Record, 0, len(in))
	for _, kr := range in {
		seq := aws.ToString(kr.SequenceNumber)
		arrival := aws.ToTime(kr.ApproximateArrivalTimestamp)
		if r.co.c.cfg.Deaggregate && kpl.IsAggregated(kr.Data) {
			subs, err := kpl.Decode(kr.Data)
			if err == nil {
				for i, s := range subs {
					if r.start.hasSkipSub && seq == r.start.sequence && int64(i) <= r.start.skipSub {
						continue
					}
					out = append(out, Record{PartitionKey: s.PartitionKey, Data: s.Data, Sequence: seq, SubSequence: int64(i), Aggregated: true, Arrival: arrival})
				}
				continue
			}
			r.log.Warnf("Record %s looks KPL-aggregated but does not decode; delivering it as is: %v", seq, err)
		}
		if r.start.hasSkipSub && seq == r.start.sequence {
			continue
		}
		out = append(out, Record{PartitionKey: aws.ToString(kr.PartitionKey), Data: kr.Data, Sequence: seq, Arrival: arrival})
	}
	return out
}

func (r *shardReader) lag(behind int64) {
	co := r.co
	co.c.metrics.behind.Set(behind, co.streamName, r.shard.ID)
	lag := time.Duration(behind) * time.Millisecond
	// Without a threshold (no retention known and none configured) only
	// the gauge reports lag.
	if co.lagWarn <= 0 || lag <= co.lagWarn || time.Since(r.lastLagLog) < lagLogInterval {
		return
	}
	r.lastLagLog = time.Now()
	if co.retention > 0 && lag > co.retention*9/10 {
		r.log.With("lag", lag.String()).Errorf("Shard %s is %v behind, past 90%% of the %v retention: records are about to expire unread", r.shard.ID, lag, co.retention)
		return
	}
	r.log.With("lag", lag.String()).Warnf("Shard %s is %v behind latest (lag_warn_threshold %v)", r.shard.ID, lag, co.lagWarn)
}

func (r *shardReader) getRecords(ctx context.Context, iter string) (*kinesis.GetRecordsOutput, error) {
	in := &kinesis.GetRecordsInput{ShardIterator: aws.String(iter), Limit: aws.Int32(int32(r.co.c.cfg.Limit))}
	if r.co.byARN {
		in.StreamARN = aws.String(r.co.id)
	}
	// A retry after throttling or a fault waits at least poll_interval: a
	// sooner one would itself break the shard's read limit.
	bo := r.co.c.cfg.Backoff
	bo.InitialInterval = max(bo.InitialInterval, r.co.c.cfg.PollInterval)
	bo.MaxInterval = max(bo.MaxInterval, bo.InitialInterval)
	return retryAPIWith(ctx, r.co, bo, func(ctx context.Context) (*kinesis.GetRecordsOutput, error) {
		// Each attempt is bounded: an answer that never comes (a half-open
		// connection) must not stall the shard, and the HTTP client has no
		// timeout of its own because a PutRecords of 5 MiB may need long.
		ctx, cancel := context.WithTimeout(ctx, getRecordsTimeout)
		defer cancel()
		return r.co.c.api.GetRecords(ctx, in)
	})
}

// getRecordsTimeout bounds one GetRecords attempt. A response is at most
// 10 MiB; 20 seconds is far beyond what that takes on a working link.
const getRecordsTimeout = 20 * time.Second

// iterator gets a shard iterator, retrying until it succeeds or ctx ends.
func (r *shardReader) iterator(ctx context.Context, s startSpec) (string, error) {
	in := &kinesis.GetShardIteratorInput{ShardId: aws.String(r.shard.ID), ShardIteratorType: s.iterType}
	r.co.streamParam(&in.StreamName, &in.StreamARN)
	switch s.iterType {
	case types.ShardIteratorTypeAfterSequenceNumber, types.ShardIteratorTypeAtSequenceNumber:
		in.StartingSequenceNumber = aws.String(s.sequence)
	case types.ShardIteratorTypeAtTimestamp:
		in.Timestamp = aws.Time(s.timestamp)
	}
	for {
		out, err := retryAPI(ctx, r.co, func(ctx context.Context) (*kinesis.GetShardIteratorOutput, error) {
			return r.co.c.api.GetShardIterator(ctx, in)
		})
		if err == nil {
			return aws.ToString(out.ShardIterator), nil
		}
		if ctx.Err() != nil {
			return "", ctx.Err()
		}
		r.log.Warnf("Getting a %s iterator failed; retrying: %v", s.iterType, err)
		t := time.NewTimer(r.co.c.cfg.Backoff.MaxInterval)
		select {
		case <-t.C:
		case <-ctx.Done():
			t.Stop()
			return "", ctx.Err()
		}
	}
}

// retryAPI runs a Kinesis call through the project's retry policy,
// counting throttles.
func retryAPI[T any](ctx context.Context, co *coordinator, fn func(context.Context) (T, error)) (T, error) {
	return retryAPIWith(ctx, co, co.c.cfg.Backoff, fn)
}

// retryAPIWith is retryAPI with a backoff of the caller's.
func retryAPIWith[T any](ctx context.Context, co *coordinator, bo kinesisx.Backoff, fn func(context.Context) (T, error)) (T, error) {
	p := kinesisx.RetryBuilder[T](bo).Build()
	return failsafe.With[T](p).WithContext(ctx).Get(func() (T, error) {
		v, err := fn(ctx)
		if err != nil && kinesisx.IsThrottle(err) {
			co.c.metrics.throttled.Incr(1, co.streamName)
		}
		return v, err
	})
}
