package coordinator

import (
	"fmt"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	"github.com/connect-kinesis/connect-kinesis/internal/consumer"
	"github.com/connect-kinesis/connect-kinesis/internal/consumer/consumertest"
)

// csimRecreateDuringAdmissionPause is the schedule of seed 140 (keys=4):
// i0.1 holds f/shardId-000000000000 and a pause lands at the admission of
// its batch of 10 records; f is deleted and created again while it
// sleeps, and i1.2's discovery clears the deleted stream's state, freeing
// and fencing i0.1's lease; the faults lift before i0.1's lease runs out
// by its own clock, and it delivers the batch it read from the deleted
// stream.
var csimRecreateDuringAdmissionPause = []csimStep{
	{Kind: "pause", Inst: 0, Stream: 1, Shard: 1, N: 4, D: 60 * time.Millisecond},
	{Kind: "produce", Inst: 1, Stream: 1, Shard: 0, N: 8, D: 480 * time.Millisecond},
	{Kind: "throttle", Inst: 2, Stream: 1, Shard: 2, N: 3, D: 120 * time.Millisecond},
	{Kind: "advance", Inst: 0, Stream: 0, Shard: 1, N: 1, D: 180 * time.Millisecond},
	{Kind: "produce", Inst: 0, Stream: 1, Shard: 1, N: 8, D: 60 * time.Millisecond},
	{Kind: "produce", Inst: 2, Stream: 0, Shard: 1, N: 1, D: 540 * time.Millisecond},
	{Kind: "recreate", Inst: 1, Stream: 0, Shard: 3, N: 7, D: 720 * time.Millisecond},
	{Kind: "reshard", Inst: 0, Stream: 0, Shard: 0, N: 12, D: 720 * time.Millisecond},
	{Kind: "advance", Inst: 0, Stream: 0, Shard: 0, N: 8, D: 1320 * time.Millisecond},
	{Kind: "produce", Inst: 1, Stream: 1, Shard: 0, N: 6, D: 1560 * time.Millisecond},
	{Kind: "expire", Inst: 0, Stream: 0, Shard: 0, N: 1, D: 720 * time.Millisecond},
	{Kind: "recreate", Inst: 0, Stream: 1, Shard: 0, N: 4, D: 1320 * time.Millisecond},
	{Kind: "throttle", Inst: 0, Stream: 1, Shard: 0, N: 2, D: 120 * time.Millisecond},
	{Kind: "output", Inst: 0, Stream: 0, Shard: 0, N: 1, D: 420 * time.Millisecond},
	{Kind: "produce", Inst: 2, Stream: 1, Shard: 1, N: 8, D: 60 * time.Millisecond},
}

// TestSimulateConsumerRecreateDuringAdmissionPause guards the fencing
// check that judged a batch of a deleted stream by the lease of the stream
// created again under its name: the batch is judged by the lease it was
// read under, which the re-create fenced for commits but which its holder
// still held by its own clock.
func TestSimulateConsumerRecreateDuringAdmissionPause(t *testing.T) {
	stats := &csimStats{}
	// Goroutines ready at one virtual instant run in the scheduler's
	// order, so the schedule reaches the delivery in most runs, not all.
	for range 10 {
		if failed, log := csimRunSchedule(t, stats, csimRecreateDuringAdmissionPause, 4); failed != "" {
			t.Fatalf("%s\nlast events:\n  %s", failed, strings.Join(log[max(0, len(log)-30):], "\n  "))
		}
	}
}

// TestSimulateConsumerFencingByIncarnation guards the fencing check's
// reading of a deleted stream's batch: judged by the lease it was read
// under, as the re-create fenced it, it passes only for that lease's
// holder within that lease's term, and a batch of the stream created
// again is judged by the store's lease, which the re-create freed.
func TestSimulateConsumerFencingByIncarnation(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		ctx := t.Context()
		s := &csim{stats: &csimStats{}, api: consumertest.NewKinesis(), marks: map[string]consumer.Position{}, delivered: map[string]int{},
			acked: map[string]int{}, newestGen: map[string]int{}, keys: 4, t0: time.Now()}
		f := s.addStream("f", true)
		shard := s.newShard(f, "", "")
		first := f.created
		if _, err := f.store.StreamCreated(ctx, first, first); err != nil {
			t.Fatal(err)
		}
		if _, err := f.store.Acquire(ctx, shard, "i0.1"); err != nil {
			t.Fatal(err)
		}
		time.Sleep(csimPeriod / 2)
		s.recreate(f)
		if cleared, err := f.store.StreamCreated(ctx, first, f.created); err != nil || !cleared {
			t.Fatalf("the re-create cleared nothing (%v, %v)", cleared, err)
		}
		holder, other := &csimInst{sim: s, id: "i0.1"}, &csimInst{sim: s, id: "i1.2"}
		deliver := func(in *csimInst, gen, n int) string {
			s.failed = ""
			s.onDelivery(in, &consumer.Batch{Stream: consumertest.FakeARNPrefix + "f", Shard: shard,
				Records: []consumer.Record{{Data: fmt.Appendf(nil, "%s/%d", csimKey("f", gen, shard), n)}}})
			return s.failed
		}
		if failed := deliver(holder, 1, 1); failed != "" {
			t.Errorf("the holder of the deleted stream's lease, within its term: %s", failed)
		}
		if failed := deliver(other, 1, 2); !strings.Contains(failed, "fencing:") {
			t.Errorf("an instance that never held the deleted stream's lease delivered its record unseen (%q)", failed)
		}
		time.Sleep(csimPeriod / 2)
		if failed := deliver(holder, 1, 3); !strings.Contains(failed, "fencing:") {
			t.Errorf("the holder delivered a record of the deleted stream past its lease's term unseen (%q)", failed)
		}
		if failed := deliver(holder, 2, 1); !strings.Contains(failed, "fencing:") {
			t.Errorf("a record of the stream created again was delivered under the lease the re-create freed unseen (%q)", failed)
		}
	})
}

// TestSimulateConsumerLeftGoroutineReported guards a schedule that left a
// goroutine blocked: synctest's deadlock panic at the bubble's end was
// all a run printed (seed 1's five-minute run, at batch 219), without the
// schedule, the goroutine or the log.
func TestSimulateConsumerLeftGoroutineReported(t *testing.T) {
	var failed string
	csimBubble(t, func(*testing.T) string {
		block := make(chan struct{})
		go func() { <-block }()
		return "goroutines left after every consumer closed: (the one blocked)"
	}, &failed)
	if !strings.Contains(failed, "goroutines left") || !strings.Contains(failed, "deadlock") {
		t.Errorf("the schedule's failure reads %q", failed)
	}
}
