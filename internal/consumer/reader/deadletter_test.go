package reader

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/connect-kinesis/connect-kinesis/internal/consumer"
	"github.com/connect-kinesis/connect-kinesis/internal/consumer/consumertest"
)

// A dead letter that is down: the record that used its attempts waits for
// it, the shard waits behind it (nothing later is handed over, the
// checkpoint stays before the record), and once the dead letter takes the
// record the shard resumes and every other record is processed once.
func TestDeadLetterDownMakesTheShardWaitAndLosesNothing(t *testing.T) {
	t.Parallel()
	const poison = 4
	dl := &fakeDeadLetter{fail: 5, open: make(chan struct{})}
	h := startPoisonReader(t, nextShard(), &consumertest.KinesisShard{Records: 20},
		poisonConfig(10, consumer.Redelivery{MaxAttempts: 2, Isolate: true, DeadLetter: dl}))
	processed := map[int]int{}
	// Until the record is bound for the dead letter: fail it, ack the rest.
	timeout := time.After(10 * time.Second)
	for dl.writes() == 0 {
		var b *consumer.Batch
		select {
		case b = <-h.out:
		case <-time.After(10 * time.Millisecond):
			continue
		case <-timeout:
			t.Fatal("the record never went to the dead letter")
		}
		require.True(t, b.Admit())
		bad := false
		for _, rec := range b.Records {
			bad = bad || recordNum(t, rec) == poison
		}
		if bad {
			b.Ack(errPoison)
			continue
		}
		for _, rec := range b.Records {
			processed[recordNum(t, rec)]++
		}
		b.Ack(nil)
	}
	// The dead letter fails 5 writes, then hangs until opened.
	require.Eventually(t, func() bool { return dl.writes() >= 6 }, 10*time.Second, time.Millisecond)
	select {
	case b := <-h.out:
		t.Fatalf("records %s.. handed over while the dead letter had not taken record %d", b.Records[0].Data, poison)
	case <-time.After(300 * time.Millisecond):
	}
	assert.Equal(t, consumertest.SeqOf(h.shard, poison-1), h.checkpointEventually(t, consumertest.SeqOf(h.shard, poison-1)),
		"the checkpoint passes the records before it, not the record")
	assert.EqualValues(t, 5, h.metric(consumer.MetricDeadLetterErrors))
	assert.Zero(t, h.metric(consumer.MetricDeadLettered, consumer.DeadLetterMaxAttempts))
	assert.Eventually(t, func() bool { return h.metric(consumer.MetricRedeliveryOldest) >= 1 }, 5*time.Second, 10*time.Millisecond,
		"the gauge shows how long the shard has waited for the record")

	close(dl.open)
	for len(processed) < 19 {
		b := h.next(t, 10*time.Second)
		for _, rec := range b.Records {
			k := recordNum(t, rec)
			require.NotEqual(t, poison, k, "the dead-lettered record was delivered again")
			processed[k]++
		}
		b.Ack(nil)
	}
	for k := 1; k <= 20; k++ {
		if k != poison {
			assert.Equal(t, 1, processed[k], "record %d", k)
		}
	}
	require.Len(t, dl.records(), 1)
	assert.Equal(t, consumertest.SeqOf(h.shard, poison), dl.records()[0].Sequence)
	assert.Equal(t, consumertest.SeqOf(h.shard, 20), h.checkpointEventually(t, consumertest.SeqOf(h.shard, 20)))
	assert.EqualValues(t, 1, h.metric(consumer.MetricDeadLettered, consumer.DeadLetterMaxAttempts))
	assert.Zero(t, h.metric(consumer.MetricRedeliveryOldest), "nothing waits any more")
}

// max_record_age: a failed batch's records older than the age go to the
// dead letter instead of being delivered again; newer ones are retried.
// Their first delivery is never refused for their age. The batch failed
// whole with nothing else processed, so the failure is charged to nobody.
func TestMaxRecordAgeSendsOldRecordsToTheDeadLetter(t *testing.T) {
	t.Parallel()
	old := time.Now().Add(-2 * time.Hour)
	dl := &fakeDeadLetter{}
	h := startPoisonReader(t, nextShard(), &consumertest.KinesisShard{Records: 10, Arrival: func(i int) time.Time {
		if i <= 5 {
			return old
		}
		return time.Now()
	}}, poisonConfig(10, consumer.Redelivery{MaxRecordAge: time.Hour, DeadLetter: dl}))
	b := h.next(t, 10*time.Second)
	require.Len(t, b.Records, 10, "old records are delivered the first time")
	b.Ack(errPoison)
	again := h.next(t, 10*time.Second)
	var got []int
	for i, rec := range again.Records {
		got = append(got, recordNum(t, rec))
		assert.Equal(t, 2, again.Attempt(i))
	}
	assert.Equal(t, []int{6, 7, 8, 9, 10}, got, "only the newer records are delivered again")
	dead := dl.records()
	require.Len(t, dead, 5)
	for k, d := range dead {
		assert.Equal(t, consumertest.SeqOf(h.shard, k+1), d.Sequence)
		assert.Equal(t, consumer.DeadLetterMaxRecordAge, d.Reason)
		assert.Equal(t, 1, d.Deliveries)
		assert.Zero(t, d.Failures)
		assert.Equal(t, errPoison.Error(), d.LastError)
	}
	assert.Equal(t, consumertest.SeqOf(h.shard, 5), h.checkpointEventually(t, consumertest.SeqOf(h.shard, 5)),
		"the dead-lettered records count as done")
	again.Ack(nil)
	assert.Equal(t, consumertest.SeqOf(h.shard, 10), h.checkpointEventually(t, consumertest.SeqOf(h.shard, 10)))
	assert.EqualValues(t, 5, h.metric(consumer.MetricDeadLettered, consumer.DeadLetterMaxRecordAge))
}

// With lanes (shard_parallelism above 1) each lane isolates its own batch:
// the poison record's lane finds it and dead-letters it, every other
// record is processed once, and the checkpoint reaches the end.
func TestLanesIsolateTheirOwnBatches(t *testing.T) {
	t.Parallel()
	const n, poison = 40, 13
	dl := &fakeDeadLetter{}
	cfg := poisonConfig(10, consumer.Redelivery{MaxAttempts: 2, Isolate: true, DeadLetter: dl})
	cfg.ShardParallelism = 4
	h := startPoisonReader(t, nextShard(), &consumertest.KinesisShard{Records: n, Keys: 8}, cfg)
	processed := map[int]int{}
	for len(processed) < n-1 || len(dl.records()) == 0 {
		var b *consumer.Batch
		select {
		case b = <-h.out:
		case <-time.After(10 * time.Second):
			t.Fatalf("stuck: %d processed, %d dead-lettered", len(processed), len(dl.records()))
		}
		require.True(t, b.Admit())
		bad := false
		for _, rec := range b.Records {
			bad = bad || recordNum(t, rec) == poison
		}
		if bad {
			go b.Ack(errPoison)
			continue
		}
		for _, rec := range b.Records {
			processed[recordNum(t, rec)]++
		}
		go b.Ack(nil)
	}
	for k := 1; k <= n; k++ {
		if k != poison {
			assert.Equal(t, 1, processed[k], "record %d", k)
		}
	}
	require.Len(t, dl.records(), 1)
	assert.Equal(t, consumertest.SeqOf(h.shard, poison), dl.records()[0].Sequence)
	assert.Equal(t, consumertest.SeqOf(h.shard, n), h.checkpointEventually(t, consumertest.SeqOf(h.shard, n)))
}

// A hand-off while a nacked batch is sent again in parts: the reader
// waits for the part in the pipeline, commits the records done from the
// batch's start (not those done behind the failed one) and releases the
// lease; the next owner reads again from the failed record.
func TestHandBackDuringIsolationCommitsTheDonePrefix(t *testing.T) {
	t.Parallel()
	h := startPoisonReader(t, nextShard(), &consumertest.KinesisShard{Records: 10},
		poisonConfig(10, consumer.Redelivery{Isolate: true}))
	b := h.next(t, 10*time.Second)
	require.Len(t, b.Records, 10)
	errs := make([]error, 10)
	errs[5] = errPoison // record 6
	b.AckRecords(errs)
	again := h.next(t, 10*time.Second)
	require.Len(t, again.Records, 1)
	h.r.Stop()
	again.Ack(errPoison)
	select {
	case <-h.r.Done():
	case <-time.After(10 * time.Second):
		t.Fatal("the reader did not hand the shard back")
	}
	out := h.r.Outcome()
	assert.True(t, out.Released)
	assert.Equal(t, 5, out.Unacked, "records 6 to 10 are read again by the next owner")
	assert.Equal(t, consumertest.SeqOf(h.shard, 5), h.checkpoint(t))
}
