package source

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/kinesis"
	"github.com/aws/aws-sdk-go-v2/service/kinesis/types"
	"github.com/failsafe-go/failsafe-go"
	"github.com/redpanda-data/benthos/v4/public/service"

	"github.com/connect-kinesis/connect-kinesis/internal/consumer"
	"github.com/connect-kinesis/connect-kinesis/internal/kinesisx"
)

// Subscription timing. Kinesis allows one SubscribeToShard per second per
// shard and consumer, ends each subscription after five minutes, and pushes
// an event at least every few seconds while a subscription lives (an empty
// one when nothing was written).
const (
	// subscribeInterval is the least time between two SubscribeToShard
	// calls of one shard.
	subscribeInterval = time.Second
	// eventInterval is the longest Kinesis waits between two events of a
	// live subscription; a subscription silent for twice as long is taken
	// for hung (a half-open connection) and renewed.
	eventInterval = 5 * time.Second
	// pausedLimit is how long a subscription may go unread while the
	// pipeline has no room for another batch. Past it the subscription is
	// cancelled, so a slow pipeline never leaves events buffered in the
	// connection, and renewed after the last record handed over once
	// there is room again.
	pausedLimit = 2 * eventInterval
)

// EventStream is the live part of one subscription: the SDK's
// *kinesis.SubscribeToShardEventStream.
type EventStream interface {
	Events() <-chan types.SubscribeToShardEventStream
	Close() error
	Err() error
}

// SubscribeFunc opens one subscription.
type SubscribeFunc func(ctx context.Context, in *kinesis.SubscribeToShardInput) (EventStream, error)

// subscriptionSource is the RecordSource of enhanced fan-out. It subscribes
// where it was told to start, yields each event as a batch, and renews the
// subscription after the last record it returned whenever the current one
// ends: the five-minute session is over, the stream failed or went silent,
// or the reader left it unread for pausedLimit. Subscribing is retried by
// one failsafe-go policy; ResourceInUse (the previous subscription of the
// shard is still held for a few seconds) waits like throttling, and
// ResourceNotFound is told apart: a stream consumer gone (registered again
// at once, efo_resolve.go) or a shard or stream gone (ErrShardNotFound, for
// the reader to judge).
//
// A shard's end comes as an event with ChildShards. An emulator that never
// sends them (kinesis-mock) is covered by a check with GetRecords, at most
// once per shard_discovery_interval and only while the subscription is
// caught up and quiet: a closed shard read to its end answers with no
// next iterator and its children.
type subscriptionSource struct {
	subscribe SubscribeFunc
	api       consumer.KinesisAPI // for the end-of-shard check
	stream    string
	consumer  *StreamConsumer
	shard     string
	log       *service.Logger
	exec      failsafe.Executor[EventStream]
	warn      warnPacer
	// room is the shard's part of the input's byte budget: reserved once
	// a subscription is live, before its next event is read, and given
	// back when the subscription fails or goes silent.
	room Room
	// inUse paces the warnings while another subscription holds the shard
	// (ResourceInUse as the stream's first event), since inUseSince.
	inUse      warnPacer
	inUseSince time.Time
	// gone paces the warnings while subscriptions keep ending with
	// ResourceNotFound in-stream, since goneSince.
	gone       warnPacer
	goneSince  time.Time
	checkEvery time.Duration
	lastCheck  time.Time

	from         Start     // where the next subscription starts
	subscribedAt time.Time // when the last SubscribeToShard was sent
	hungAfter    time.Duration
	pausedAfter  time.Duration

	mu           sync.Mutex // guards what the pause timer touches
	cur          EventStream
	pause        *time.Timer
	endedByPause bool
}

func newSubscriptionSource(p Params, sc *StreamConsumer, subscribe SubscribeFunc) *subscriptionSource {
	cfg := p.Config
	s := &subscriptionSource{
		subscribe:   subscribe,
		api:         p.API,
		stream:      p.Stream,
		consumer:    sc,
		shard:       p.Shard,
		log:         p.Log,
		warn:        newWarnPacer(cfg.Backoff),
		inUse:       newWarnPacer(cfg.Backoff),
		gone:        newWarnPacer(cfg.Backoff),
		checkEvery:  cfg.DiscoveryInterval,
		from:        p.From,
		room:        p.Room,
		hungAfter:   2 * eventInterval,
		pausedAfter: cmp.Or(p.PausedAfter, pausedLimit),
	}
	s.exec = failsafe.With(sourceRetry(cfg.Backoff, subscribeInterval, subscribeDelay, s.warnRetry).
		// A shard or stream that does not exist is the reader's to judge
		// (trimmed, or deleted), not a failure to retry blindly.
		AbortIf(func(_ EventStream, err error) bool { return errors.Is(err, ErrShardNotFound) }).
		Build())
	return s
}

// subscribeDelay is the wait before subscribing again after err (-1: the
// backoff).
func subscribeDelay(err error, slowest time.Duration) time.Duration {
	if errors.Is(err, errConsumerGone) {
		return -1 // the consumer is resolved again at once
	}
	if !kinesisx.Retryable(err) && kinesisx.ErrorCode(err) != kinesisx.CodeResourceInUse {
		// A deleted consumer or a denied role is looked at again at the
		// slowest pace.
		return slowest
	}
	return -1
}

// NextAt is zero: a subscription pushes, the reader never waits for a pace.
func (s *subscriptionSource) NextAt() time.Time { return time.Time{} }

// Close ends the current subscription.
func (s *subscriptionSource) Close() {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.pause != nil {
		s.pause.Stop()
	}
	s.closeLocked()
}

func (s *subscriptionSource) closeLocked() {
	if s.cur != nil {
		_ = s.cur.Close()
		s.cur = nil
	}
}

// Next returns the next event of the shard, subscribing again as often as
// needed. While the reader does not call Next the subscription is unread;
// after pausedLimit it is cancelled (see pausedLimit).
func (s *subscriptionSource) Next(ctx context.Context) (Batch, error) {
	b, err := s.next(ctx)
	if err == nil && !b.End {
		s.mu.Lock()
		s.pause = time.AfterFunc(s.pausedAfter, s.cancelPaused)
		s.mu.Unlock()
	}
	return b, err
}

func (s *subscriptionSource) next(ctx context.Context) (Batch, error) {
	hung := time.NewTimer(s.hungAfter)
	defer hung.Stop()
	for {
		events, err := s.events(ctx)
		if err != nil {
			return Batch{}, err
		}
		// The subscription stays unread while the shard waits for room
		// (the pause timer still runs: past pausedLimit it is cancelled,
		// and its closed stream makes this loop subscribe again).
		if err := s.room.Reserve(ctx); err != nil {
			return Batch{}, err
		}
		s.resume()
		hung.Reset(s.hungAfter)
		select {
		case <-ctx.Done():
			return Batch{}, ctx.Err()
		case <-hung.C:
			s.log.Debugf("No subscription event for %v; subscribing again", s.hungAfter)
			s.room.GiveBack()
			s.renew()
		case ev, ok := <-events:
			if !ok {
				s.ended()
				continue
			}
			e, isEvent := ev.(*types.SubscribeToShardEventStreamMemberSubscribeToShardEvent)
			if !isEvent {
				continue // a kind of event this client does not know
			}
			b := s.batch(&e.Value)
			if !b.End && len(b.Records) == 0 && b.MillisBehindLatest == 0 {
				if end, ok := s.checkEnd(ctx); ok {
					return end, nil
				}
			}
			return b, nil
		}
	}
}

// events returns the events of the live subscription, subscribing first
// when there is none.
func (s *subscriptionSource) events(ctx context.Context) (<-chan types.SubscribeToShardEventStream, error) {
	s.mu.Lock()
	cur := s.cur
	s.mu.Unlock()
	if cur != nil {
		return cur.Events(), nil
	}
	s.warn.reset()
	es, err := s.exec.WithContext(ctx).Get(func() (EventStream, error) {
		es, err := s.open(ctx)
		if err != nil {
			s.room.GiveBack() // a subscribe that fails holds no room while it is retried
		}
		return es, err
	})
	if err != nil {
		return nil, err
	}
	s.mu.Lock()
	s.cur = es
	s.mu.Unlock()
	s.room.Subscribed()
	return es.Events(), nil
}

// open sends one SubscribeToShard in its pacing slot, through the stream
// consumer as last resolved. A ResourceNotFound answer is told apart: the
// consumer gone (resolved again by the next attempt) or the shard or stream
// (ErrShardNotFound, the reader's to judge).
func (s *subscriptionSource) open(ctx context.Context) (EventStream, error) {
	if err := sleepUntil(ctx, s.subscribedAt.Add(subscribeInterval)); err != nil {
		return nil, err
	}
	arn, err := s.consumer.current(ctx)
	if kinesisx.ErrorCode(err) == kinesisx.CodeResourceNotFound {
		// Registering the consumer found no stream.
		return nil, fmt.Errorf("registering the stream consumer again: %w: %w", ErrShardNotFound, err)
	}
	if err != nil {
		return nil, fmt.Errorf("resolving the stream consumer: %w", err)
	}
	s.subscribedAt = time.Now()
	es, err := s.subscribe(ctx, &kinesis.SubscribeToShardInput{
		ConsumerARN: aws.String(arn), ShardId: aws.String(s.shard), StartingPosition: s.from.startingPosition(),
	})
	if err == nil {
		s.log.Tracef("Subscribed to the shard at %s %s", s.from.IterType, s.from.Sequence)
		return es, nil
	}
	err = fmt.Errorf("subscribing to the shard at %s: %w", s.from.IterType, err)
	if kinesisx.ErrorCode(err) != kinesisx.CodeResourceNotFound {
		return nil, err
	}
	gone, derr := s.consumer.gone(ctx, arn)
	switch {
	case derr != nil:
		return nil, fmt.Errorf("%w (and %w)", err, derr)
	case gone:
		return nil, fmt.Errorf("%w: %w", errConsumerGone, err)
	}
	return nil, fmt.Errorf("%w: %w", ErrShardNotFound, err)
}

// renew drops the current subscription; the next read subscribes again.
func (s *subscriptionSource) renew() {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.closeLocked()
}

// batch turns an event into a Batch and moves the start of the next
// subscription past it: the reader delivers everything Next returns, so
// the event's continuation is after the last record delivered.
func (s *subscriptionSource) batch(e *types.SubscribeToShardEvent) Batch {
	b := Batch{Records: e.Records, MillisBehindLatest: aws.ToInt64(e.MillisBehindLatest), ChildShards: e.ChildShards}
	s.inUseSince = time.Time{} // the shard is ours again
	switch {
	case aws.ToString(e.ContinuationSequenceNumber) != "":
		s.from = After(aws.ToString(e.ContinuationSequenceNumber))
	case len(e.Records) > 0:
		s.from = After(aws.ToString(e.Records[len(e.Records)-1].SequenceNumber))
	}
	// The last event of a closed shard names its children (and has no
	// continuation).
	b.End = len(e.ChildShards) > 0
	return b
}

// warnRetry logs a failing subscribe, paced by warnPacer; ResourceInUse
// (the previous subscription still held) counts as trouble known to pass.
func (s *subscriptionSource) warnRetry(e failsafe.ExecutionScheduledEvent[EventStream]) {
	err := e.LastError()
	known := kinesisx.Retryable(err) || kinesisx.ErrorCode(err) == kinesisx.CodeResourceInUse || errors.Is(err, errConsumerGone)
	if !s.warn.due(known, e.ElapsedTime()) {
		return
	}
	s.log.Warnf("Subscribing to the shard failed; retrying in %v: %v", e.Delay.Round(time.Millisecond), err)
}
