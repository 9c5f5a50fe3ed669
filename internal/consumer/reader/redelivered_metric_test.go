package reader

import (
	"context"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/service/kinesis/types"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/connect-kinesis/connect-kinesis/internal/consumer"
	"github.com/connect-kinesis/connect-kinesis/internal/consumer/consumertest"
	"github.com/connect-kinesis/connect-kinesis/internal/consumer/source"
)

// Guards the defect "kinesis_redelivered and kinesis_input_redelivered_total
// count different things": after a takeover, the records the earlier owner
// stored as delivered arrived marked kinesis_redelivered, while the metric
// counted only deliveries after a nack (426 marked, the metric at 4). The
// metric must count every marked delivery, by cause: `mark` for the
// takeover's, `nack` for this instance's own redeliveries.
func TestRedeliveredMetricCountsEveryMarkedDeliveryByCause(t *testing.T) {
	t.Parallel()
	shard := nextShard()
	ctx, cancel := context.WithCancel(t.Context())
	api := consumertest.NewKinesis()
	api.Add(shard, &consumertest.KinesisShard{Records: 10})
	store := consumertest.NewStore(time.Minute)
	take, err := store.Acquire(ctx, shard, "me")
	require.NoError(t, err)
	cfg := poisonConfig(10, consumer.Redelivery{Isolate: true})
	require.NoError(t, cfg.Validate())
	out := make(chan *consumer.Batch)
	st := testStream(ctx, &cfg, api, store, out)
	st.Metrics = consumer.NewMetrics(consumertest.Metrics(t))
	// The take found the earlier owner's mark at record 4: it had handed
	// records 1 to 4 to its pipeline before it died.
	start := source.Start{IterType: types.ShardIteratorTypeTrimHorizon, DeliveredBefore: consumer.Position{Sequence: consumertest.SeqOf(shard, 4)}}
	r := New(st, consumer.Shard{ID: shard}, take.Lease, start)
	go r.Run()
	t.Cleanup(func() {
		cancel()
		<-r.Done()
	})
	h := &poisonHarness{r: r, out: out, store: store, shard: shard}

	marked := map[string]int{} // marked deliveries by cause, as the pipeline sees them
	see := func(b *consumer.Batch) {
		for i := range b.Records {
			if b.Redelivered(i) {
				cause := "mark"
				if b.Attempt(i) > 1 {
					cause = "nack"
				}
				marked[cause]++
			}
		}
	}
	b := h.next(t, 10*time.Second)
	require.Len(t, b.Records, 10)
	see(b)
	// Records 3 and 7 fail once: both come again, marked by the nack.
	errs := make([]error, 10)
	errs[2], errs[6] = errPoison, errPoison
	b.AckRecords(errs)
	again := h.next(t, 10*time.Second)
	see(again)
	again.Ack(nil)
	h.checkpointEventually(t, consumertest.SeqOf(shard, 10))

	t.Logf("marked deliveries: %v; %s: mark %d, nack %d", marked, consumer.MetricRedelivered,
		h.metric(consumer.MetricRedelivered, "mark"), h.metric(consumer.MetricRedelivered, "nack"))
	assert.Equal(t, map[string]int{"mark": 4, "nack": 2}, marked, "what the pipeline saw marked")
	assert.EqualValues(t, marked["mark"], h.metric(consumer.MetricRedelivered, "mark"), "every delivery the takeover's mark marked is counted")
	assert.EqualValues(t, marked["nack"], h.metric(consumer.MetricRedelivered, "nack"), "every delivery after a nack is counted")
}
