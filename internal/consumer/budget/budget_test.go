package budget

import (
	"context"
	"fmt"
	"log/slog"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/kinesis/types"
	"github.com/connect-kinesis/connect-kinesis/internal/consumer"
	"github.com/connect-kinesis/connect-kinesis/internal/consumer/consumertest"
	"github.com/redpanda-data/benthos/v4/public/service"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// The budget's warning comes once per episode, not once per waiting shard
// or per check: two shards wait past the threshold and one WARN is logged,
// and one INFO with the longest wait once they are let in; once none
// waited for the episode gap, a new wait warns again.
func TestBudgetWarnsOncePerEpisode(t *testing.T) {
	t.Parallel()
	var logs consumertest.SyncBuffer
	b := New(100, consumer.NewMetrics(nil))
	log := service.NewLoggerFromSlog(slog.New(slog.NewTextHandler(&logs, nil)))
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	go b.Watch(ctx, log, 100*time.Millisecond, 300*time.Millisecond, 10*time.Millisecond)
	const warning = "level=WARN msg=\"The input's byte budget"

	b.charge(100)
	w1, w2 := b.enqueue(50, 50), b.enqueue(50, 50)
	assert.Eventually(t, func() bool { return logs.Count(warning) == 1 }, 5*time.Second, 10*time.Millisecond)
	time.Sleep(200 * time.Millisecond) // many more checks, both shards still waiting
	assert.Equal(t, 1, logs.Count(warning), "one warning for the episode")

	assert.Zero(t, logs.Count(LetInAgain), "the shards still wait")
	b.giveBack(100)
	<-w1.ready
	<-w2.ready
	assert.Eventually(t, func() bool { return logs.Count(LetInAgain) == 1 }, 5*time.Second, 10*time.Millisecond,
		"the warned wait's end is logged")
	assert.Regexp(t, `level=INFO msg="The input's byte budget lets in the shards it held back: the longest wait was \d`, logs.String())
	assert.Eventually(t, func() bool { return logs.Count("no longer holds shards back") == 1 }, 5*time.Second, 10*time.Millisecond)

	b.enqueue(50, 50) // the budget is full again (w1 and w2 hold it)
	assert.Eventually(t, func() bool { return logs.Count(warning) == 2 }, 5*time.Second, 10*time.Millisecond, "a new episode warns again")
}

// What a shard asks for and the Limit it then uses: the largest answer
// before it knows its records, `limit` records when that room is granted,
// fewer large records when only part of it is free, the largest answer at
// its record size while behind, little (and the full `limit`) after an
// empty answer at the tip, and little for a quiet subscription.
func TestShardBudgetAsksAndLimits(t *testing.T) {
	const limit = 10000
	ctx := t.Context()
	b := New(1<<30, consumer.NewMetrics(nil))
	s := NewShard(b, limit, false, nil, "")
	require.NoError(t, s.Reserve(ctx))
	assert.Equal(t, WhileReading(MaxAnswerBytes+limit*RecordOverhead), s.reserved, "room for the largest answer first")
	assert.Equal(t, int32(limit), s.CallLimit(), "which holds any answer")

	big := []consumer.Record{{Data: make([]byte, 900_000), PartitionKey: "k", Sequence: "1"}}
	raw := []types.Record{{Data: big[0].Data, PartitionKey: aws.String("k"), SequenceNumber: aws.String("1")}}
	s.Settle(big, raw, 5000)
	held, _, _ := b.State()
	rec := RecordsCost(big)
	assert.Equal(t, rec, held, "charged at its cost")

	// Behind, it asks for the largest answer of such records (11 fit in
	// 10 MiB); with only 2 MiB free it gets those and asks for one record.
	b.charge(1<<30 - 2<<20 - held)
	require.NoError(t, s.Reserve(ctx))
	assert.Equal(t, int64(2<<20), s.reserved, "what is free")
	assert.Equal(t, int32(1), s.CallLimit())
	s.GiveBack()

	// With room, all of it, and any answer fits.
	b.giveBack(1<<30 - 2<<20 - held)
	require.NoError(t, s.Reserve(ctx))
	assert.Equal(t, WhileReading(11*rec), s.reserved)
	assert.Equal(t, int32(limit), s.CallLimit())

	// An empty answer at the tip: little room, the full limit.
	s.Settle(nil, nil, 0)
	require.NoError(t, s.Reserve(ctx))
	assert.Equal(t, WhileReading(max(rec, MinAnswerBytes)), s.reserved)
	assert.Equal(t, int32(limit), s.CallLimit(), "a burst is read in one call")
	s.Close()

	sub := NewShard(New(1<<30, consumer.NewMetrics(nil)), limit, true, nil, "")
	sub.Settle(nil, nil, 0)
	require.NoError(t, sub.Reserve(ctx))
	assert.Equal(t, WhileReading(MinEventBytes), sub.reserved, "a quiet subscription holds little")
	sub.Close()
}

// A subscription cannot ask for a smaller event, so it asks for the event
// it may get: a full one (2 MiB of its records' data) before its first
// event, after each subscribe, and while behind the tip; twice its last
// event at the tip. On a small budget that is half the budget, granted
// whole or not at all, so few subscriptions catch up at once. A request
// queued as the source subscribes again is resized in its place.
func TestSubscriptionAsksForAFullEventUntilAtTheTip(t *testing.T) {
	ctx := t.Context()
	b := New(1<<30, consumer.NewMetrics(nil))
	sub := NewShard(b, 10000, true, nil, "s/0")
	require.NoError(t, sub.Reserve(ctx))
	assert.Equal(t, WhileReading(2*maxRecordBytes), sub.reserved, "before any event: two of the largest records")

	// Behind the tip: a full event at the shard's record sizes (2 MiB of
	// 1,000-byte records: 2,097 records).
	recs, raw := records(3, 1000)
	sub.Settle(recs, raw, 60_000)
	require.NoError(t, sub.Reserve(ctx))
	full := int64(2<<20/1000) * Cost(&recs[0])
	assert.Equal(t, full, sub.fullEvent())
	assert.Equal(t, WhileReading(full), sub.reserved, "behind the tip: a full event")

	// At the tip: twice its last event.
	sub.Settle(recs, raw, 0)
	require.NoError(t, sub.Reserve(ctx))
	assert.Equal(t, WhileReading(MinEventBytes), sub.reserved, "at the tip: little")
	sub.GiveBack()

	// Subscribed again (a break, a take): a full event, whatever the last
	// event said.
	sub.Subscribed()
	require.NoError(t, sub.Reserve(ctx))
	assert.Equal(t, WhileReading(full), sub.reserved, "just subscribed: a full event")
	sub.Settle(recs, raw, 0)
	sub.Close()

	// Small records: at most 10,000 of them.
	tiny := NewShard(b, 10000, true, nil, "s/1")
	trecs, traw := records(1, 10)
	tiny.Settle(trecs, traw, 1)
	assert.Equal(t, int64(maxEventRecords)*Cost(&trecs[0]), tiny.fullEvent())
	tiny.Close()

	// A budget of 2 MiB: a subscription behind asks for half of it, and
	// waits while less than that is free; one at the tip asks for little.
	small := New(2<<20, consumer.NewMetrics(nil))
	behind := NewShard(small, 10000, true, nil, "s/2")
	behind.Settle(recs, raw, 60_000)
	quiet := NewShard(small, 10000, true, nil, "s/3")
	quiet.Settle(recs, raw, 0)
	base, _, _ := small.State() // the two events' records
	small.charge(1<<20 + 1 - base)
	wait, cancel := context.WithTimeout(ctx, 50*time.Millisecond)
	defer cancel()
	assert.ErrorIs(t, behind.Reserve(wait), context.DeadlineExceeded, "no part of half the budget will do")
	held, waiting, _ := small.State()
	assert.Equal(t, int64(1<<20+1), held, "nothing granted")
	assert.Equal(t, 1, waiting, "it keeps its place")
	small.giveBack(1<<19 + 1)
	require.NoError(t, behind.Reserve(ctx))
	assert.Equal(t, int64(1<<20), behind.reserved, "half the budget")
	require.NoError(t, quiet.Reserve(ctx), "other subscriptions at the tip go on")
	assert.Equal(t, WhileReading(MinEventBytes), quiet.reserved)
	quiet.Settle(recs, raw, 0)
	behind.Close()

	// Queued for little, it subscribes again: its request grows in place.
	held, _, _ = small.State()
	small.charge(2<<20 - held - 1)
	wait2, cancel2 := context.WithTimeout(ctx, 50*time.Millisecond)
	defer cancel2()
	assert.ErrorIs(t, quiet.Reserve(wait2), context.DeadlineExceeded, "the budget is full")
	_, waiting, _ = small.State()
	require.Equal(t, 1, waiting)
	quiet.Subscribed()
	small.giveBack(200 << 10) // room for a quiet event, not for half the budget
	wait3, cancel3 := context.WithTimeout(ctx, 50*time.Millisecond)
	defer cancel3()
	assert.ErrorIs(t, quiet.Reserve(wait3), context.DeadlineExceeded, "it now waits for a full event's room")
	_, waiting, _ = small.State()
	assert.Equal(t, 1, waiting, "in its place")
	small.giveBack(1 << 20)
	require.NoError(t, quiet.Reserve(ctx))
	assert.Equal(t, int64(1<<20), quiet.reserved)
	quiet.Close()
}

// records makes n user records of size bytes of data, one per Kinesis
// record.
func records(n, size int) ([]consumer.Record, []types.Record) {
	recs := make([]consumer.Record, n)
	raw := make([]types.Record, n)
	for i := range n {
		seq := fmt.Sprintf("%05d", i)
		recs[i] = consumer.Record{Data: make([]byte, size), PartitionKey: "k", Sequence: seq}
		raw[i] = types.Record{Data: recs[i].Data, PartitionKey: aws.String("k"), SequenceNumber: aws.String(seq)}
	}
	return recs, raw
}

// No shard asks for more than half the budget, so one never holds all of
// it while others wait; a record larger than that still goes ahead.
func TestShardBudgetAsksHalfTheBudgetAtMost(t *testing.T) {
	b := New(4<<20, consumer.NewMetrics(nil))
	s := NewShard(b, 10000, false, nil, "")
	require.NoError(t, s.Reserve(t.Context()))
	assert.Equal(t, int64(2<<20), s.reserved)
	s.Close()
}

// A budget held by calls Kinesis has not answered says so, and does not
// send the user to the pipeline (seed 9's hour with efo: GetRecords calls
// the emulator left unanswered for 20 s held the room a new shard needed,
// and the warning said the pipeline was slower than the streams). Once
// the calls answer and the records wait for acks instead, the next
// episode names the pipeline.
func TestBudgetWarningNamesCallsNotAnswered(t *testing.T) {
	t.Parallel()
	var logs consumertest.SyncBuffer
	b := New(4<<20, consumer.NewMetrics(nil))
	log := service.NewLoggerFromSlog(slog.New(slog.NewTextHandler(&logs, nil)))
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	go b.Watch(ctx, log, 100*time.Millisecond, 300*time.Millisecond, 10*time.Millisecond)

	// Two shards' calls under way hold the room; a shard that knows
	// nothing of its records yet waits.
	calling := []*Shard{NewShard(b, 10000, false, nil, "s/0"), NewShard(b, 10000, false, nil, "s/1")}
	for _, s := range calling {
		require.NoError(t, s.Reserve(ctx))
	}
	waiting := NewShard(b, 10000, false, nil, "s/2")
	ready := waiting.ask()
	assert.Eventually(t, func() bool { return logs.Count("have not answered yet") == 1 }, 5*time.Second, 10*time.Millisecond)
	assert.Zero(t, logs.Count("The pipeline is slower"), "the pipeline is not what holds the room")
	assert.Contains(t, logs.String(), "reserved_for_calls=4194304")

	// The calls answer with records that then wait for the pipeline.
	recs := []consumer.Record{{Data: make([]byte, 1<<20), PartitionKey: "k", Sequence: "1"}}
	raw := []types.Record{{Data: recs[0].Data, PartitionKey: aws.String("k"), SequenceNumber: aws.String("1")}}
	for _, s := range calling {
		s.Settle(recs, raw, 0)
	}
	<-ready
	require.NoError(t, waiting.Reserve(ctx))
	waiting.GiveBack()
	assert.Eventually(t, func() bool { return logs.Count("no longer holds shards back") == 1 }, 5*time.Second, 10*time.Millisecond)
	b.charge(3 << 20) // records waiting for acks fill the budget
	waiting.ask()
	assert.Eventually(t, func() bool { return logs.Count("The pipeline is slower") == 1 }, 5*time.Second, 10*time.Millisecond)
	assert.Contains(t, logs.String(), "reserved_for_calls=0")
}

// The warning that the pipeline is slower says how much of what the
// budget holds was handed to the pipeline and waits for its acks, apart
// from what the readers hold: 2 of an answer's 3 records handed over, the
// third still with its reader.
func TestBudgetWarningSaysWhatWasHandedToThePipeline(t *testing.T) {
	t.Parallel()
	var logs consumertest.SyncBuffer
	b := New(2<<20, consumer.NewMetrics(nil))
	log := service.NewLoggerFromSlog(slog.New(slog.NewTextHandler(&logs, nil)))
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()

	s := NewShard(b, 10000, false, nil, "s/0")
	require.NoError(t, s.Reserve(ctx))
	recs := make([]consumer.Record, 3)
	raw := make([]types.Record, 3)
	for i := range recs {
		recs[i] = consumer.Record{Data: make([]byte, 1<<20), PartitionKey: "k", Sequence: fmt.Sprint(i)}
		raw[i] = types.Record{Data: recs[i].Data, PartitionKey: aws.String("k"), SequenceNumber: aws.String(fmt.Sprint(i))}
	}
	s.Settle(recs, raw, 0)
	var c Charge
	c.Set(RecordsCost(recs[:2]))
	s.HandedOver(&c)

	go b.Watch(ctx, log, 100*time.Millisecond, 300*time.Millisecond, 10*time.Millisecond)
	NewShard(b, 10000, false, nil, "s/1").ask()
	assert.Eventually(t, func() bool { return logs.Count("The pipeline is slower") == 1 }, 5*time.Second, 10*time.Millisecond)
	want := RecordsCost(recs[:2])
	assert.Contains(t, logs.String(), fmt.Sprintf("while %d bytes of records wait in the input or for the pipeline's acks, %d of them handed to the pipeline", RecordsCost(recs), want))
	assert.Contains(t, logs.String(), fmt.Sprintf("%s=%d", InPipelineField, want))
}

// Guards an idle shard let in on part of its room asking Kinesis for the
// full `limit` (consumer simulation, seed 238: the budget held 1,084 bytes
// above max_buffered_bytes): after an empty answer at the tip a shard
// asks for little room, and when only part of that is free it must ask
// for no more records than that part holds, or the burst written since
// takes the budget over its bound.
func TestIdleShardOnPartialRoomStaysWithinTheBudget(t *testing.T) {
	const limit, capacity = 10000, 3 << 20
	ctx := t.Context()
	b := New(capacity, consumer.NewMetrics(nil))
	s := NewShard(b, limit, false, nil, "")
	require.NoError(t, s.Reserve(ctx))
	recs, raw := records(3, 40)
	s.Settle(recs, raw, 0) // records, at the tip
	require.NoError(t, s.Reserve(ctx))
	s.Settle(nil, nil, 0) // then an empty answer at the tip: idle
	rec := RecordsCost(recs[:1])

	// Others hold all but two records' worth (and a bit): the idle shard
	// is let in on that part of its room.
	free := 2*rec + rec/2
	held, _, _ := b.State()
	b.charge(capacity - held - free)
	wait, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	require.NoError(t, s.Reserve(wait))
	require.Equal(t, free, s.reserved, "let in on what is free")

	// Eight records were written since the empty answer; Kinesis returns
	// as many of them as the call asks for.
	n := min(int(s.CallLimit()), 8)
	burst, burstRaw := records(n, 40)
	s.Settle(burst, burstRaw, 0)
	assert.LessOrEqual(t, b.PeakHeld(), int64(capacity),
		"the call asked for %d records on room for %d", n, recordsRoom(free)/rec)
}
