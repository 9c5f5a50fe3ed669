package reader

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/connect-kinesis/connect-kinesis/internal/consumer"
	"github.com/connect-kinesis/connect-kinesis/internal/consumer/consumertest"
)

// endReader ends h's reader (a hand-off when stop, else at once) and waits
// for it.
func endReader(t *testing.T, h *poisonHarness, stop bool) {
	t.Helper()
	if stop {
		h.r.Stop()
	} else {
		h.r.Cancel()
	}
	select {
	case <-h.r.Done():
	case <-time.After(10 * time.Second):
		t.Fatal("the reader did not end")
	}
	require.Zero(t, h.metric(consumer.MetricRedeliveryOldest), "the reader's end zeroes the gauge")
}

// Guards issue 59 item 4, with the defaults: a nack that comes after the
// reader handed the shard off does not set
// kinesis_input_redelivery_oldest_seconds again. The reader is gone, and
// nobody will send the batch again here: a frozen value would keep
// KinesisShardBlockedOnRedelivery firing.
func TestRedeliveryGaugeStaysZeroAfterALateNack(t *testing.T) {
	t.Parallel()
	cfg := poisonConfig(10, consumer.Redelivery{})
	cfg.HandoffTimeout = 100 * time.Millisecond
	h := startPoisonReader(t, nextShard(), &consumertest.KinesisShard{Records: 5}, cfg)
	b := h.next(t, 10*time.Second)
	endReader(t, h, true)
	time.Sleep(1100 * time.Millisecond) // the batch is more than a second old
	b.Ack(errPoison)
	time.Sleep(50 * time.Millisecond)
	assert.Zero(t, h.metric(consumer.MetricRedeliveryOldest), "the ended reader's late nack set the gauge")
}

// Guards issue 59 item 4, with shard_max_in_flight 2: once the reader has
// ended, one isolated batch's late finish does not set the gauge from
// another isolated batch that nobody follows any more.
func TestRedeliveryGaugeStaysZeroAfterALateFinish(t *testing.T) {
	t.Parallel()
	cfg := poisonConfig(1, consumer.Redelivery{})
	cfg.ShardMaxInFlight = 2
	h := startPoisonReader(t, nextShard(), &consumertest.KinesisShard{Records: 5}, cfg)
	a, b := h.next(t, 10*time.Second), h.next(t, 10*time.Second)
	a.Ack(errPoison)
	again := h.next(t, 10*time.Second) // a sent again, followed by the reader
	require.Equal(t, a.Records[0].Sequence, again.Records[0].Sequence)
	b.Ack(errPoison) // b is isolated too, queued behind a
	endReader(t, h, false)
	time.Sleep(1100 * time.Millisecond) // b is more than a second old
	again.Ack(nil)                      // a's late finish
	time.Sleep(50 * time.Millisecond)
	assert.Zero(t, h.metric(consumer.MetricRedeliveryOldest), "a late finish set the ended reader's gauge from another batch")
}
