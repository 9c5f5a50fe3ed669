package reader

import (
	"errors"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/connect-kinesis/connect-kinesis/internal/consumer"
	"github.com/connect-kinesis/connect-kinesis/internal/consumer/consumertest"
)

var errOutputDown = errors.New("http_client: 503 Service Unavailable")

// failAll is the verdict of an output that is down on batch b: named per
// message (a BatchError naming every message, as reject_errored gives in
// front of an output that fails), or on the whole batch.
func failAll(b *consumer.Batch, named bool) {
	if !named {
		b.Ack(errOutputDown)
		return
	}
	errs := make([]error, len(b.Records))
	for i := range errs {
		errs[i] = errOutputDown
	}
	b.AckRecords(errs)
}

// Guards issue 59 item 5: an output down for more hand-overs than
// max_attempts, whose verdicts name every message (reject_errored) or
// fail the batch whole, dead-lettered good records (10 of 10 after 3
// named failures). An outage is nobody's own failure: nothing goes to the
// dead letter, and once the output is back every record is processed
// once and the checkpoint reaches the end.
func TestOutputDownDeadLettersNothing(t *testing.T) {
	t.Parallel()
	const n, maxAttempts, down = 10, 3, 12
	for name, named := range map[string]bool{"every message named": true, "the batch failed whole": false} {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			dl := &fakeDeadLetter{}
			h := startPoisonReader(t, nextShard(), &consumertest.KinesisShard{Records: n},
				poisonConfig(n, consumer.Redelivery{MaxAttempts: maxAttempts, Isolate: true, DeadLetter: dl}))
			processed := map[int]int{}
			handOvers := 0
			for len(processed)+len(dl.records()) < n {
				var b *consumer.Batch
				select {
				case b = <-h.out:
				case <-time.After(10 * time.Second):
					t.Fatalf("stuck after %d hand-overs: %d processed, %d dead-lettered", handOvers, len(processed), len(dl.records()))
				}
				if !b.Admit() {
					continue
				}
				handOvers++
				if handOvers <= down {
					failAll(b, named)
					continue
				}
				for _, rec := range b.Records {
					processed[recordNum(t, rec)]++
				}
				b.Ack(nil)
			}
			assert.Empty(t, dl.records(), "an outage sends no good record to the dead letter")
			assert.Zero(t, h.metric(consumer.MetricDeadLettered, consumer.DeadLetterMaxAttempts))
			for k := 1; k <= n; k++ {
				assert.Equal(t, 1, processed[k], "record %d processed once", k)
			}
			assert.Equal(t, consumertest.SeqOf(h.shard, n), h.checkpointEventually(t, consumertest.SeqOf(h.shard, n)))
		})
	}
}

// max_record_age keeps AWS Lambda's meaning during an outage: a record
// older than it when it would be delivered again goes to the dead letter
// although no failure was its own; newer records wait for the output.
func TestMaxRecordAgeDeadLettersDuringAnOutage(t *testing.T) {
	t.Parallel()
	old := time.Now().Add(-2 * time.Hour)
	dl := &fakeDeadLetter{}
	h := startPoisonReader(t, nextShard(), &consumertest.KinesisShard{Records: 10, Arrival: func(i int) time.Time {
		if i <= 4 {
			return old
		}
		return time.Now()
	}}, poisonConfig(10, consumer.Redelivery{MaxAttempts: 3, MaxRecordAge: time.Hour, Isolate: true, DeadLetter: dl}))
	processed := map[int]int{}
	handOvers := 0
	for len(processed)+len(dl.records()) < 10 {
		b := h.next(t, 10*time.Second)
		handOvers++
		if handOvers <= 8 {
			failAll(b, true)
			continue
		}
		for _, rec := range b.Records {
			k := recordNum(t, rec)
			assert.Greater(t, k, 4, "an old record was delivered again")
			processed[k]++
		}
		b.Ack(nil)
	}
	dead := dl.records()
	require.Len(t, dead, 4, "the records past max_record_age, and only they")
	for k, d := range dead {
		assert.Equal(t, consumertest.SeqOf(h.shard, k+1), d.Sequence)
		assert.Equal(t, consumer.DeadLetterMaxRecordAge, d.Reason)
		assert.Zero(t, d.Failures, "an outage charges nobody")
	}
	assert.Equal(t, consumertest.SeqOf(h.shard, 10), h.checkpointEventually(t, consumertest.SeqOf(h.shard, 10)))
	assert.EqualValues(t, 4, h.metric(consumer.MetricDeadLettered, consumer.DeadLetterMaxRecordAge))
}

// Guards the other side of issue 59 item 5: a poison record among good
// ones, with an output that names it (reject_errored) while the input's
// other shard is processed, is still charged and dead-lettered after
// max_attempts; its batch's good records and the other shard's records
// are processed once.
func TestPoisonRecordAmongGoodOnesIsStillDeadLettered(t *testing.T) {
	t.Parallel()
	const n, poison, maxAttempts = 10, 4, 3
	dl := &fakeDeadLetter{}
	cfg := poisonConfig(n, consumer.Redelivery{MaxAttempts: maxAttempts, Isolate: true, DeadLetter: dl})
	processed := new(Processed)
	a := startInputReader(t, nextShard(), &consumertest.KinesisShard{Records: n}, cfg, processed)
	other := startInputReader(t, nextShard(), &consumertest.KinesisShard{Records: 2000}, cfg, processed)
	done := map[int]int{}
	otherDone := 0
	deadline := time.After(20 * time.Second)
	for len(done) < n-1 || len(dl.records()) == 0 {
		select {
		case b := <-a.out:
			if !b.Admit() {
				continue
			}
			errs := make([]error, len(b.Records))
			for i, rec := range b.Records {
				if k := recordNum(t, rec); k == poison {
					errs[i] = errPoison
				} else {
					done[k]++
				}
			}
			b.AckRecords(errs)
		case b := <-other.out:
			if b.Admit() {
				otherDone += len(b.Records)
				b.Ack(nil)
			}
		case <-deadline:
			t.Fatalf("stuck: %d of the shard's good records processed, %d dead-lettered, %d of the other shard's processed", len(done), len(dl.records()), otherDone)
		}
	}
	dead := dl.records()
	require.Len(t, dead, 1)
	assert.Equal(t, consumertest.SeqOf(a.shard, poison), dead[0].Sequence)
	assert.Equal(t, consumer.DeadLetterMaxAttempts, dead[0].Reason)
	assert.Equal(t, maxAttempts, dead[0].Failures)
	for k := 1; k <= n; k++ {
		if k != poison {
			assert.Equal(t, 1, done[k], "record %d processed once", k)
		}
	}
	assert.Equal(t, consumertest.SeqOf(a.shard, n), a.checkpointEventually(t, consumertest.SeqOf(a.shard, n)))
	t.Logf("the other shard had %d records processed meanwhile", otherDone)
}

// Guards issue 59 item 5 on a one-shard input with nothing else flowing:
// a record the output singled out (named among processed messages, as
// reject_errored does for a processing error) is charged again whenever it
// fails alone with that same error, so it still reaches the dead letter
// after max_attempts; its failures with an outage's error in between are
// charged to nobody.
func TestARecordTheOutputSinglesOutIsChargedWithoutOtherTraffic(t *testing.T) {
	t.Parallel()
	const n, poison, maxAttempts, outage = 10, 4, 3, 5
	dl := &fakeDeadLetter{}
	h := startPoisonReader(t, nextShard(), &consumertest.KinesisShard{Records: n},
		poisonConfig(n, consumer.Redelivery{MaxAttempts: maxAttempts, Isolate: true, DeadLetter: dl}))
	b := h.next(t, 10*time.Second)
	require.Len(t, b.Records, n)
	errs := make([]error, n)
	errs[poison-1] = errPoison
	b.AckRecords(errs)
	// The record is charged once for that; then the outage's failures,
	// then the rest of its attempts with its own error.
	for k := 1; k <= outage+maxAttempts-1; k++ {
		again := h.next(t, 10*time.Second)
		require.Len(t, again.Records, 1)
		require.Equal(t, poison, recordNum(t, again.Records[0]))
		if k <= outage {
			failAll(again, true) // the output is down meanwhile
			continue
		}
		again.AckRecords([]error{errPoison})
	}
	require.Eventually(t, func() bool { return len(dl.records()) > 0 }, 5*time.Second, time.Millisecond, "the record went to the dead letter")
	dead := dl.records()
	require.Len(t, dead, 1)
	assert.Equal(t, consumertest.SeqOf(h.shard, poison), dead[0].Sequence)
	assert.Equal(t, maxAttempts, dead[0].Failures, "the outage's failures are not charged")
	assert.Equal(t, 1+outage+maxAttempts-1, dead[0].Deliveries)
	assert.Equal(t, consumertest.SeqOf(h.shard, n), h.checkpointEventually(t, consumertest.SeqOf(h.shard, n)))
}

// Guards issue 59 item 5 when the output goes down while a poison record
// is being isolated (the output fails batches whole): the good records
// being halved at that moment fail with the outage's error, not the one
// the poison record gave, so none is charged for the outage; once the
// output is back the poison record alone goes to the dead letter.
func TestOutageDuringIsolationDeadLettersOnlyThePoisonRecord(t *testing.T) {
	t.Parallel()
	const n, poison, maxAttempts, down = 16, 12, 3, 15
	dl := &fakeDeadLetter{}
	h := startPoisonReader(t, nextShard(), &consumertest.KinesisShard{Records: n},
		poisonConfig(n, consumer.Redelivery{MaxAttempts: maxAttempts, Isolate: true, DeadLetter: dl}))
	processed := map[int]int{}
	handOvers, failedDown := 0, 0
	for len(processed)+len(dl.records()) < n {
		b := h.next(t, 10*time.Second)
		handOvers++
		bad := false
		for _, rec := range b.Records {
			bad = bad || recordNum(t, rec) == poison
		}
		switch {
		case len(processed) > 0 && failedDown < down:
			// The first half was processed; now the output is down.
			failedDown++
			b.Ack(errOutputDown)
		case bad:
			b.Ack(errPoison)
		default:
			for _, rec := range b.Records {
				processed[recordNum(t, rec)]++
			}
			b.Ack(nil)
		}
	}
	require.Len(t, dl.records(), 1, "only the poison record")
	assert.Equal(t, consumertest.SeqOf(h.shard, poison), dl.records()[0].Sequence)
	for k := 1; k <= n; k++ {
		if k != poison {
			assert.Equal(t, 1, processed[k], "record %d processed once", k)
		}
	}
	t.Logf("%d hand-overs, %d of them while the output was down", handOvers, failedDown)
}
