package reader

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/connect-kinesis/connect-kinesis/internal/consumer"
	"github.com/connect-kinesis/connect-kinesis/internal/consumer/consumertest"
)

// TestPoisonRecordWhereNothingElseFlowsIsSentAgainUncharged replays the
// soak's run that counted 10 records lost (seed of soak58 run 5: an
// instance took a shard, delivered 20 records, then a poison record
// arrived alone in its batch as the producers stopped, and nothing else of
// the input was processed). The reading "the reader held it without
// sending it again" is wrong: the reader sends it again after each backoff,
// without end, and charges none of its failures, as no record of the input
// was processed after it (the documented limit "A poison record where
// nothing else flows"): it never reaches max_attempts, and the records
// behind it wait. Only max_record_age sends it on.
func TestPoisonRecordWhereNothingElseFlowsIsSentAgainUncharged(t *testing.T) {
	t.Parallel()
	const n, poison, maxAttempts = 6, 3, 5
	for name, age := range map[string]time.Duration{"no max_record_age": 0, "max_record_age": 50 * time.Millisecond} {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			dl := &fakeDeadLetter{}
			h := startPoisonReader(t, nextShard(), &consumertest.KinesisShard{Records: n},
				poisonConfig(1, consumer.Redelivery{MaxAttempts: maxAttempts, MaxRecordAge: age, DeadLetter: dl}))
			for k := 1; k < poison; k++ {
				b := h.next(t, 10*time.Second)
				require.Equal(t, k, recordNum(t, b.Records[0]))
				b.Ack(nil)
			}
			sends := 0
			deadline := time.Now().Add(time.Second)
			for time.Now().Before(deadline) && len(dl.records()) == 0 {
				var b *consumer.Batch
				select {
				case b = <-h.out:
				case <-time.After(100 * time.Millisecond):
					continue
				}
				if !b.Admit() {
					continue
				}
				if k := recordNum(t, b.Records[0]); k != poison {
					require.NotZero(t, age, "record %d handed over behind the poison record", k)
					b.Ack(nil)
					continue
				}
				sends++
				b.Ack(errPoison)
			}
			if age == 0 {
				assert.Greater(t, sends, 4*maxAttempts, "sent again after each backoff, without end")
				assert.Empty(t, dl.records(), "never charged: nothing else of the input was processed after it")
				return
			}
			require.Eventually(t, func() bool { return len(dl.records()) == 1 }, 5*time.Second, time.Millisecond)
			assert.Equal(t, consumer.DeadLetterMaxRecordAge, dl.records()[0].Reason)
			assert.Zero(t, dl.records()[0].Failures, "no failure of it charged")
		})
	}
}
