package reader

import (
	"errors"
	"math"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/connect-kinesis/connect-kinesis/internal/consumer"
	"github.com/connect-kinesis/connect-kinesis/internal/consumer/consumertest"
)

var errPoison = errors.New("the sink refuses this record")

// recordNum is i of a record whose data is "<shard>/<i>".
func recordNum(t *testing.T, r consumer.Record) int {
	t.Helper()
	_, num, _ := strings.Cut(string(r.Data), "/")
	i, err := strconv.Atoi(num)
	require.NoError(t, err)
	return i
}

// A batch of 500 with one record the output always fails, and an output
// that fails a batch whole (no per-message errors): isolation finds the
// record by halving, so no good record is delivered more than
// ceil(log2 500)+1 extra times; the record goes to the dead letter after
// max_attempts failures of its own, with what the reader knew of it; every
// good record is processed once, and the checkpoint reaches the end.
func TestIsolationFindsOnePoisonRecordInABatchOf500(t *testing.T) {
	t.Parallel()
	const n, poison, maxAttempts = 500, 137, 3
	dl := &fakeDeadLetter{}
	h := startPoisonReader(t, nextShard(), &consumertest.KinesisShard{Records: n},
		poisonConfig(n, consumer.Redelivery{MaxAttempts: maxAttempts, Isolate: true, DeadLetter: dl}))
	seen := map[int]int{} // deliveries per record
	processed := map[int]int{}
	handOvers, redelivered := 0, 0
	for len(processed) < n-1 || len(dl.records()) == 0 {
		b := h.next(t, 20*time.Second)
		handOvers++
		if handOvers > 1 {
			redelivered += len(b.Records)
		}
		bad := false
		for i, rec := range b.Records {
			k := recordNum(t, rec)
			seen[k]++
			assert.Equal(t, seen[k], b.Attempt(i), "record %d: the attempt on the batch counts its deliveries", k)
			bad = bad || k == poison
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
	maxExtra := 0
	for k, c := range seen {
		if k != poison {
			maxExtra = max(maxExtra, c-1)
		}
	}
	bound := int(math.Ceil(math.Log2(n))) + 1
	t.Logf("%d hand-overs, %d records handed over again; a good record was delivered at most %d extra times (bound %d); the poison record %d times",
		handOvers, redelivered, maxExtra, bound, seen[poison])
	assert.LessOrEqual(t, maxExtra, bound)
	for k := 1; k <= n; k++ {
		if k != poison {
			assert.Equal(t, 1, processed[k], "record %d processed once", k)
		}
	}
	dead := dl.records()
	require.Len(t, dead, 1)
	assert.Equal(t, consumertest.SeqOf(h.shard, poison), dead[0].Sequence)
	assert.Equal(t, h.shard+"/"+strconv.Itoa(poison), string(dead[0].Data), "the record as read")
	assert.Equal(t, consumer.DeadLetterMaxAttempts, dead[0].Reason)
	assert.Equal(t, maxAttempts, dead[0].Failures, "only failures of the record alone are charged")
	assert.Equal(t, seen[poison], dead[0].Deliveries)
	assert.Equal(t, errPoison.Error(), dead[0].LastError)
	assert.Equal(t, "s", dead[0].Stream)
	assert.Equal(t, h.shard, dead[0].Shard)
	assert.WithinDuration(t, time.Now(), dead[0].At, 10*time.Second)
	require.Eventually(t, func() bool { return h.checkpoint(t) == consumertest.SeqOf(h.shard, n) }, 10*time.Second, 10*time.Millisecond)
	assert.EqualValues(t, redelivered, h.metric(consumer.MetricRedelivered, consumer.RedeliveredNack))
	assert.EqualValues(t, 1, h.metric(consumer.MetricDeadLettered, consumer.DeadLetterMaxAttempts))
	assert.Zero(t, h.metric(consumer.MetricRedeliveryOldest), "nothing waits any more")
}

// An output that names the failed messages (a BatchError, or
// reject_errored): only they are delivered again, together and in order,
// with their attempt numbers; the others are processed once. This holds
// with the zero policy too.
func TestNamedFailuresAreTheOnlyRecordsSentAgain(t *testing.T) {
	t.Parallel()
	for name, pol := range map[string]consumer.Redelivery{"zero policy": {}, "isolate": {Isolate: true}} {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			shard := nextShard()
			h := startPoisonReader(t, shard, &consumertest.KinesisShard{Records: 10}, poisonConfig(10, pol))
			b := h.next(t, 10*time.Second)
			require.Len(t, b.Records, 10)
			errs := make([]error, 10)
			errs[2], errs[6] = errPoison, errPoison // records 3 and 7
			b.AckRecords(errs)

			again := h.next(t, 10*time.Second)
			var got []int
			for i, rec := range again.Records {
				got = append(got, recordNum(t, rec))
				assert.Equal(t, 2, again.Attempt(i))
			}
			assert.Equal(t, []int{3, 7}, got, "only the named records, in order")
			assert.Equal(t, consumertest.SeqOf(shard, 2), h.checkpointEventually(t, consumertest.SeqOf(shard, 2)),
				"the checkpoint passes the records processed before the first failed one")
			// The second failed again alone; the first is processed.
			again.AckRecords([]error{nil, errPoison})
			last := h.next(t, 10*time.Second)
			require.Len(t, last.Records, 1)
			assert.Equal(t, 7, recordNum(t, last.Records[0]))
			assert.Equal(t, 3, last.Attempt(0))
			last.Ack(nil)
			assert.Equal(t, consumertest.SeqOf(shard, 10), h.checkpointEventually(t, consumertest.SeqOf(shard, 10)))
			assert.EqualValues(t, 3, h.metric(consumer.MetricRedelivered, consumer.RedeliveredNack))
		})
	}
}

// checkpointEventually waits until the checkpoint is want, and returns the
// checkpoint it saw last.
func (h *poisonHarness) checkpointEventually(t *testing.T, want string) string {
	t.Helper()
	var got string
	assert.Eventually(t, func() bool { got = h.checkpoint(t); return got == want }, 10*time.Second, 10*time.Millisecond)
	return got
}
