package coordinator

import (
	"testing"
	"time"

	"github.com/connect-kinesis/connect-kinesis/internal/consumer"
	"github.com/connect-kinesis/connect-kinesis/internal/consumer/consumertest"
	_ "github.com/redpanda-data/benthos/v4/public/components/pure"
	"github.com/stretchr/testify/require"
)

// The lag gauge of a shard drops to 0 when the shard leaves the instance,
// and kinesis_input_shards_unowned counts the ready shards nobody reads.
func TestLagAndUnownedGauges(t *testing.T) {
	api := consumertest.NewKinesis()
	const s0, s1 = "shardId-000000000000", "shardId-000000000001"
	api.Add(s0, &consumertest.KinesisShard{Records: 5, Behind: 4000})
	api.Add(s1, &consumertest.KinesisShard{Records: 5, Behind: 4000})
	cfg := testConfig()
	st := consumertest.NewStore(time.Hour)
	// A live member that reads nothing: this instance's fair share is one
	// of the two shards, so the other one has no reader.
	require.NoError(t, st.Heartbeat(t.Context(), "idle-member"))
	c := startConsumerWithMetrics(t, cfg, api, st, consumertest.Metrics(t))
	var b *consumer.Batch
	select {
	case b = <-c.Batches():
	case <-time.After(10 * time.Second):
		t.Fatal("no batch delivered")
	}
	lag := consumer.MetricMillisBehind + "{s," + b.Shard + "}"
	unowned := consumer.MetricShardsUnowned + "{s}"
	require.Eventually(t, func() bool { v, _ := consumertest.Gauges.Get(lag); return v == 4000 }, 5*time.Second, 10*time.Millisecond)
	require.Eventually(t, func() bool { v, ok := consumertest.Gauges.Get(unowned); return ok && v == 1 }, 5*time.Second, 10*time.Millisecond,
		"one ready shard has no reader")

	// The lease is lost: the shard leaves this instance, its lag with it.
	st.Mu.Lock()
	st.LoseOnRenew[b.Shard] = true
	st.Mu.Unlock()
	b.Ack(nil)
	require.Eventually(t, func() bool { v, _ := consumertest.Gauges.Get(lag); return v == 0 }, 5*time.Second, 10*time.Millisecond,
		"the lag of a shard this instance no longer reads is not frozen at its last value")
	// Its fair share free again, the instance takes the shard nobody read;
	// the lost one is read by the instance that took it.
	require.Eventually(t, func() bool { v, _ := consumertest.Gauges.Get(unowned); return v == 0 }, 5*time.Second, 10*time.Millisecond)
}
