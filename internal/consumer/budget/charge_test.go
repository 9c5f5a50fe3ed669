package budget

import (
	"context"
	"fmt"
	"log/slog"
	"testing"
	"time"

	"github.com/redpanda-data/benthos/v4/public/service"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/connect-kinesis/connect-kinesis/internal/consumer"
	"github.com/connect-kinesis/connect-kinesis/internal/consumer/consumertest"
)

// Guards the reading of issue 59 that Returned after Close gives a charge
// back twice: a nacked batch is the reader's again (Returned), the reader
// ends (Close gives back what it holds, that batch too), and a second
// Returned on the same charge comes late (a lane that followed the batch
// notes its verdict only after the reader closed). The second must give
// back nothing: Close did.
func TestReturnedAfterCloseGivesNoChargeBackTwice(t *testing.T) {
	b := New(1<<20, consumer.NewMetrics(nil))
	s := NewShard(b, 10, false, nil, "s/0")
	require.NoError(t, s.Reserve(t.Context()))
	recs, raw := records(2, 1000)
	s.Settle(recs, raw, 1)
	batch := &Charge{}
	batch.Set(RecordsCost(recs))
	s.HandedOver(batch)
	s.Returned(batch) // nacked: the reader holds it to send it again
	s.Close()         // the reader ends: nobody will
	require.NoError(t, b.Drained(), "the nacked batch is given back when its reader ends")
	s.Returned(batch)
	s.Release(batch)
	held, _, _ := b.State()
	assert.Equal(t, int64(0), held, "a late Returned or Release gives nothing back twice")
	assert.NoError(t, b.Drained())
}

// Guards issue 59 item 1's WARN: the stall warning names the readers that
// hold the room, and never one that has ended. A batch of an ended reader
// still in the pipeline is room held by the pipeline, and is said so,
// without the gone reader's name.
func TestStallWarningNamesNoEndedReader(t *testing.T) {
	var logs consumertest.SyncBuffer
	log := service.NewLoggerFromSlog(slog.New(slog.NewTextHandler(&logs, nil)))
	recs, raw := records(2, 1000)
	b := New(1<<30, consumer.NewMetrics(nil))
	b.SetStallAfter(0)
	gone := NewShard(b, 10, false, nil, "s/gone")
	require.NoError(t, gone.Reserve(t.Context()))
	gone.Settle(recs, raw, 1)
	batch := &Charge{}
	batch.Set(RecordsCost(recs))
	gone.HandedOver(batch)
	gone.Close() // its batch stays in the pipeline
	live := NewShard(b, 10, false, nil, "s/live")
	require.NoError(t, live.Reserve(t.Context()))
	live.Settle(recs, raw, 1)
	held, _, _ := b.State()
	b.charge(1<<30 - held) // the budget is full
	waiting := NewShard(b, 10, false, nil, "s/waiting")
	waiting.ask()
	b.watchStall(log, time.Now().Add(time.Second), time.Time{})
	require.Equal(t, 1, logs.Count("has let no shard in for"), logs.String())
	assert.Contains(t, logs.String(), fmt.Sprintf("s/live (%d bytes)", RecordsCost(recs)))
	assert.NotContains(t, logs.String(), "s/gone", "a reader that ended is named")
	assert.Contains(t, logs.String(), fmt.Sprintf("%d bytes in batches of readers that ended, still in the pipeline", RecordsCost(recs)))
	waiting.Close()
}

// Guards issue 59 item 1's invariant in the running input: once every
// shard is closed and every batch in the pipeline got its verdict, the
// budget holds nothing. Room held then, by whatever defect, would shrink
// max_buffered_bytes for good: the budget takes it back, Watch logs an
// ERROR, and Drained reports it to tests.
func TestBudgetTakesBackRoomHeldOnceNoReaderHoldsAny(t *testing.T) {
	var logs consumertest.SyncBuffer
	log := service.NewLoggerFromSlog(slog.New(slog.NewTextHandler(&logs, nil)))
	b := New(1<<20, consumer.NewMetrics(nil))
	s := NewShard(b, 10, false, nil, "s/0")
	require.NoError(t, s.Reserve(t.Context()))
	recs, raw := records(2, 1000)
	s.Settle(recs, raw, 1)
	batch := &Charge{}
	batch.Set(RecordsCost(recs))
	s.HandedOver(batch)
	b.charge(777) // room nobody will give back
	s.Close()
	held, _, _ := b.State()
	require.Equal(t, RecordsCost(recs)+777, held, "the batch in the pipeline is still held")
	s.Release(batch) // its verdict: now no reader holds anything
	held, _, _ = b.State()
	assert.Equal(t, int64(0), held, "the room nobody held was taken back")
	assert.ErrorContains(t, b.Drained(), "held 777 bytes once no reader held anything")
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	go b.Watch(ctx, log, time.Minute, time.Minute, 10*time.Millisecond)
	assert.Eventually(t, func() bool { return logs.Count("level=ERROR") == 1 }, 5*time.Second, 10*time.Millisecond)
	assert.Contains(t, logs.String(), "held 777 bytes once no reader held anything")
}
