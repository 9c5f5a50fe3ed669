package source

import (
	"bytes"
	"context"
	"errors"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/kinesis"
	"github.com/aws/aws-sdk-go-v2/service/kinesis/types"
	"github.com/redpanda-data/benthos/v4/public/service"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/connect-kinesis/connect-kinesis/internal/consumer"
	"github.com/connect-kinesis/connect-kinesis/internal/consumer/consumertest"
	"github.com/connect-kinesis/connect-kinesis/internal/kinesisx"
)

// fakeSubscriptions answers SubscribeToShard calls in turn and records
// where each started.
type fakeSubscriptions struct {
	mu      sync.Mutex
	answers []func() (EventStream, error)
	starts  []types.StartingPosition
	arns    []string // the consumer of each call
}

func (f *fakeSubscriptions) subscribe(_ context.Context, in *kinesis.SubscribeToShardInput) (EventStream, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.starts = append(f.starts, *in.StartingPosition)
	f.arns = append(f.arns, aws.ToString(in.ConsumerARN))
	if len(f.answers) == 0 {
		return consumertest.NewStream(nil, false, nil), nil // silence
	}
	a := f.answers[0]
	f.answers = f.answers[1:]
	return a()
}

func (f *fakeSubscriptions) startsAt() []string {
	f.mu.Lock()
	defer f.mu.Unlock()
	var out []string
	for _, p := range f.starts {
		out = append(out, string(p.Type)+" "+aws.ToString(p.SequenceNumber))
	}
	return out
}

func stream(s EventStream) func() (EventStream, error) {
	return func() (EventStream, error) { return s, nil }
}

func event(cont string, seqs ...string) types.SubscribeToShardEvent {
	e := types.SubscribeToShardEvent{ContinuationSequenceNumber: aws.String(cont), MillisBehindLatest: aws.Int64(0)}
	for _, s := range seqs {
		e.Records = append(e.Records, types.Record{SequenceNumber: aws.String(s), PartitionKey: aws.String("k"), Data: []byte(s)})
	}
	return e
}

// consumertest.ConsumerARN is the stream consumer a test subscription starts with.

func newTestSubscription(f *fakeSubscriptions, from Start) *subscriptionSource {
	return newTestSubscriptionWith(f, consumertest.NewConsumers(consumertest.ConsumerARN), from)
}

func newTestSubscriptionWith(f *fakeSubscriptions, consumers *consumertest.Consumers, from Start) *subscriptionSource {
	bo := kinesisx.Backoff{InitialInterval: 10 * time.Millisecond, MaxInterval: 20 * time.Millisecond}
	sc := NewStreamConsumer(consumers, consumertest.StreamARN, consumer.EnhancedFanOut{Enabled: true, ConsumerName: "c"}, bo, nil)
	sc.arn, sc.stale = consumertest.ConsumerARN, false
	p := Params{
		API:    consumertest.NewKinesis(),
		Stream: "s",
		Shard:  "shardId-000000000001",
		From:   from,
		Config: &consumer.Config{DiscoveryInterval: time.Hour, Backoff: bo},
		Room:   noRoom{},
	}
	return newSubscriptionSource(p, sc, f.subscribe)
}

// records returns the sequence numbers of the next n batches.
func nextSeqs(t *testing.T, s *subscriptionSource, n int) ([]string, Batch) {
	t.Helper()
	var seqs []string
	var b Batch
	for range n {
		var err error
		b, err = s.Next(t.Context())
		require.NoError(t, err)
		for _, r := range b.Records {
			seqs = append(seqs, aws.ToString(r.SequenceNumber))
		}
	}
	return seqs, b
}

func TestSubscriptionResumesAfterTheLastDeliveredRecord(t *testing.T) {
	f := &fakeSubscriptions{answers: []func() (EventStream, error){
		// A session that breaks after two events.
		stream(consumertest.NewStream([]types.SubscribeToShardEvent{event("3", "1", "2", "3"), event("5", "4", "5")}, true,
			consumertest.APIErr(500, &types.InternalFailureException{}))),
		// Throttled, then the previous subscription is still held.
		func() (EventStream, error) { return nil, consumertest.APIErr(400, &types.LimitExceededException{}) },
		func() (EventStream, error) { return nil, consumertest.APIErr(400, &types.ResourceInUseException{}) },
		// A session that ends normally (five minutes) after one event.
		stream(consumertest.NewStream([]types.SubscribeToShardEvent{event("6", "6")}, true, nil)),
		// The shard's last event names its children.
		stream(consumertest.NewStream([]types.SubscribeToShardEvent{func() types.SubscribeToShardEvent {
			e := event("", "7")
			e.ContinuationSequenceNumber = nil
			e.ChildShards = []types.ChildShard{{ShardId: aws.String("shardId-000000000002")}}
			return e
		}()}, false, nil)),
	}}
	s := newTestSubscription(f, Start{IterType: types.ShardIteratorTypeTrimHorizon})
	defer s.Close()
	seqs, last := nextSeqs(t, s, 4)
	assert.Equal(t, []string{"1", "2", "3", "4", "5", "6", "7"}, seqs, "every record once, in order")
	assert.True(t, last.End)
	assert.Len(t, last.ChildShards, 1)
	assert.Equal(t, []string{
		"TRIM_HORIZON ",
		"AFTER_SEQUENCE_NUMBER 5", "AFTER_SEQUENCE_NUMBER 5", "AFTER_SEQUENCE_NUMBER 5",
		"AFTER_SEQUENCE_NUMBER 6",
	}, f.startsAt())
}

func TestSubscriptionRenewsAHungStream(t *testing.T) {
	f := &fakeSubscriptions{answers: []func() (EventStream, error){
		stream(consumertest.NewStream([]types.SubscribeToShardEvent{event("10", "10")}, false, nil)), // then silence
		stream(consumertest.NewStream([]types.SubscribeToShardEvent{event("11", "11")}, false, nil)),
	}}
	s := newTestSubscription(f, After("9"))
	s.hungAfter = 200 * time.Millisecond
	defer s.Close()
	seqs, _ := nextSeqs(t, s, 2)
	assert.Equal(t, []string{"10", "11"}, seqs)
	assert.Equal(t, []string{"AFTER_SEQUENCE_NUMBER 9", "AFTER_SEQUENCE_NUMBER 10"}, f.startsAt())
}

func TestSubscriptionLeftUnreadIsCancelled(t *testing.T) {
	first := consumertest.NewStream([]types.SubscribeToShardEvent{event("1", "1"), event("2", "2")}, false, nil)
	f := &fakeSubscriptions{answers: []func() (EventStream, error){
		stream(first),
		stream(consumertest.NewStream([]types.SubscribeToShardEvent{event("2", "2")}, false, nil)),
	}}
	s := newTestSubscription(f, Start{IterType: types.ShardIteratorTypeLatest})
	s.pausedAfter = 100 * time.Millisecond
	defer s.Close()
	seqs, _ := nextSeqs(t, s, 1)
	require.Equal(t, []string{"1"}, seqs)
	// The pipeline has no room: Next is not called, and the subscription,
	// with an event still in it, is cancelled rather than kept buffering.
	select {
	case <-first.Closed:
	case <-time.After(5 * time.Second):
		t.Fatal("the unread subscription was not cancelled")
	}
	// With room again, reading resumes after the last record delivered.
	seqs, _ = nextSeqs(t, s, 1)
	assert.Equal(t, []string{"2"}, seqs)
	assert.Equal(t, []string{"LATEST ", "AFTER_SEQUENCE_NUMBER 1"}, f.startsAt())
}

func TestSubscriptionGivesUpOnlyWhenTheReaderStops(t *testing.T) {
	f := &fakeSubscriptions{}
	for range 100 {
		f.answers = append(f.answers, func() (EventStream, error) { return nil, consumertest.APIErr(400, &types.AccessDeniedException{}) })
	}
	s := newTestSubscription(f, After("1"))
	ctx, cancel := context.WithTimeout(t.Context(), 300*time.Millisecond)
	defer cancel()
	_, err := s.Next(ctx)
	require.Error(t, err)
	assert.True(t, errors.Is(err, context.DeadlineExceeded) || errors.Is(err, context.Canceled), "ends with ctx, got %v", err)
}

// A shard another subscription still holds (the previous owner's, not yet
// dropped) is subscribed to again until it is free, without a warning per
// refusal: kinesis-mock answers ResourceInUse as the stream's first event.
func TestSubscriptionHeldElsewhereRetriesQuietly(t *testing.T) {
	inUse := func() (EventStream, error) {
		return consumertest.NewStream(nil, true, consumertest.APIErr(400, &types.ResourceInUseException{Message: aws.String("Another active subscription exists")})), nil
	}
	f := &fakeSubscriptions{answers: []func() (EventStream, error){
		inUse, inUse, inUse,
		stream(consumertest.NewStream([]types.SubscribeToShardEvent{event("8", "8")}, false, nil)),
	}}
	var logs bytes.Buffer
	s := newTestSubscription(f, After("7"))
	s.log = service.NewLoggerFromSlog(slog.New(slog.NewTextHandler(&logs, &slog.HandlerOptions{Level: slog.LevelDebug})))
	s.inUse.every = time.Hour
	defer s.Close()
	seqs, _ := nextSeqs(t, s, 1)
	assert.Equal(t, []string{"8"}, seqs)
	assert.Equal(t, []string{"AFTER_SEQUENCE_NUMBER 7", "AFTER_SEQUENCE_NUMBER 7", "AFTER_SEQUENCE_NUMBER 7", "AFTER_SEQUENCE_NUMBER 7"}, f.startsAt())
	assert.Equal(t, 3, strings.Count(logs.String(), "Another subscription holds the shard"), logs.String())
	assert.NotContains(t, logs.String(), "level=WARN", "refusals within the warning period are not warned of")

	// Past the period, it is warned of, with how long the shard has been held.
	logs.Reset()
	f.answers = append(f.answers, inUse, inUse)
	s.inUse.every = time.Nanosecond
	s.renew()
	f.answers = append(f.answers, stream(consumertest.NewStream([]types.SubscribeToShardEvent{event("9", "9")}, false, nil)))
	seqs, _ = nextSeqs(t, s, 1)
	assert.Equal(t, []string{"9"}, seqs)
	assert.Contains(t, logs.String(), "level=WARN msg=\"Another subscription of this consumer has held the shard for")
}

// countingRoom is a Room without a budget that counts what is given back.
type countingRoom struct {
	noRoom
	mu        sync.Mutex
	givenBack int
}

func (r *countingRoom) GiveBack() {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.givenBack++
}

// A subscription that ran its five minutes keeps its room for the next one
// (the shard is still reading at the tip: giving the room back would let
// other shards take it between two sessions); one whose stream failed
// gives it back while another is opened.
func TestSubscriptionKeepsItsRoomAcrossARenewalButNotAFailure(t *testing.T) {
	f := &fakeSubscriptions{answers: []func() (EventStream, error){
		stream(consumertest.NewStream([]types.SubscribeToShardEvent{event("1", "1")}, true, nil)), // its five minutes end
		stream(consumertest.NewStream([]types.SubscribeToShardEvent{event("2", "2")}, true,
			consumertest.APIErr(500, &types.InternalFailureException{}))), // breaks
		stream(consumertest.NewStream([]types.SubscribeToShardEvent{event("3", "3")}, false, nil)),
	}}
	s := newTestSubscription(f, After("0"))
	room := &countingRoom{}
	s.room = room
	defer s.Close()

	seqs, _ := nextSeqs(t, s, 2)
	assert.Equal(t, []string{"1", "2"}, seqs)
	room.mu.Lock()
	assert.Zero(t, room.givenBack, "the room was given back when a subscription ran its five minutes")
	room.mu.Unlock()

	seqs, _ = nextSeqs(t, s, 1)
	assert.Equal(t, []string{"3"}, seqs)
	room.mu.Lock()
	assert.Equal(t, 1, room.givenBack, "a subscription that broke gives its room back once")
	room.mu.Unlock()
}

// Guards the defect: a subscription whose stream ended with an in-stream
// ResourceNotFoundException (the consumer deregistered, the shard or its
// stream gone while the subscription was live) was logged as a WARN
// "Subscription failed" each time, 161 times an hour in a soak, although
// the next subscribe tells what is gone and handles it. Such endings are
// logged at DEBUG, and warned of only when they keep coming for the
// warning period, then at its pace.
func TestSubscriptionEndedByResourceNotFoundIsNotAWarning(t *testing.T) {
	notFound := func(seq string) func() (EventStream, error) {
		return stream(consumertest.NewStream([]types.SubscribeToShardEvent{event(seq, seq)}, true,
			&types.ResourceNotFoundException{Message: aws.String("Shard shardId-000000000001 in stream s under account 000000000000 does not exist")}))
	}
	f := &fakeSubscriptions{answers: []func() (EventStream, error){
		notFound("1"), notFound("2"), notFound("3"),
		stream(consumertest.NewStream([]types.SubscribeToShardEvent{event("4", "4")}, false, nil)),
	}}
	var logs syncBuffer
	s := newTestSubscription(f, After("0"))
	s.log = service.NewLoggerFromSlog(slog.New(slog.NewTextHandler(&logs, &slog.HandlerOptions{Level: slog.LevelDebug})))
	s.gone.every = time.Hour
	defer s.Close()

	seqs, _ := nextSeqs(t, s, 4)
	assert.Equal(t, []string{"1", "2", "3", "4"}, seqs)
	assert.Equal(t, []string{"AFTER_SEQUENCE_NUMBER 0", "AFTER_SEQUENCE_NUMBER 1", "AFTER_SEQUENCE_NUMBER 2", "AFTER_SEQUENCE_NUMBER 3"}, f.startsAt(),
		"each subscription starts after the last record returned")
	assert.NotContains(t, logs.String(), "level=WARN", "an in-stream ResourceNotFound within the warning period is not warned of")
	assert.Equal(t, 3, strings.Count(logs.String(), "level=DEBUG msg=\"Subscription ended: Kinesis no longer finds"), logs.String())

	// When they keep coming past the warning period, they are warned of.
	logs.reset()
	s.gone.every = time.Nanosecond
	f.answers = append(f.answers, notFound("5"), notFound("6"),
		stream(consumertest.NewStream([]types.SubscribeToShardEvent{event("7", "7")}, false, nil)))
	s.renew()
	seqs, _ = nextSeqs(t, s, 3)
	assert.Equal(t, []string{"5", "6", "7"}, seqs)
	assert.Contains(t, logs.String(), "level=WARN msg=\"Subscriptions of the shard keep ending with ResourceNotFound for")
}

// syncBuffer is a log buffer written by the source's goroutines and read
// by a test.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

func (s *syncBuffer) reset() {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.b.Reset()
}
