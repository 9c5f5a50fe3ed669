package reader

import (
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/connect-kinesis/connect-kinesis/internal/consumer"
	"github.com/connect-kinesis/connect-kinesis/internal/consumer/consumertest"
)

// Guards a poison record blocking its shard forever when the output's
// error text differs on each attempt (a request id in it, as AWS services
// answer): the output names it among processed messages (reject_errored),
// yet on a one-shard input it must still reach the dead letter after
// max_attempts, as it did before outages stopped counting.
func TestPoisonWithAnErrorTextThatVariesIsStillDeadLettered(t *testing.T) {
	t.Parallel()
	const n, poison, maxAttempts = 10, 4, 3
	dl := &fakeDeadLetter{}
	h := startPoisonReader(t, nextShard(), &consumertest.KinesisShard{Records: n},
		poisonConfig(n, consumer.Redelivery{MaxAttempts: maxAttempts, Isolate: true, DeadLetter: dl}))
	handOvers := 0
	for {
		b := nextOrDeadLettered(t, h, dl)
		if b == nil {
			break
		}
		handOvers++
		require.LessOrEqual(t, handOvers, 50, "the poison record was handed over %d times and never dead-lettered", handOvers)
		errs := make([]error, len(b.Records))
		for i, rec := range b.Records {
			if recordNum(t, rec) == poison {
				errs[i] = fmt.Errorf("ValidationException: bad item, RequestID: %d", handOvers)
			}
		}
		b.AckRecords(errs)
	}
	dead := dl.records()
	require.Len(t, dead, 1)
	assert.Equal(t, consumertest.SeqOf(h.shard, poison), dead[0].Sequence)
}

// nextOrDeadLettered is h's next admitted batch, or nil once dl holds a
// record.
func nextOrDeadLettered(t *testing.T, h *poisonHarness, dl *fakeDeadLetter) *consumer.Batch {
	t.Helper()
	timeout := time.After(10 * time.Second)
	tick := time.NewTicker(time.Millisecond)
	defer tick.Stop()
	for {
		select {
		case b := <-h.out:
			if b.Admit() {
				return b
			}
		case <-tick.C:
			if len(dl.records()) > 0 {
				return nil
			}
		case <-timeout:
			t.Fatal("no batch handed over and nothing dead-lettered")
			return nil
		}
	}
}
