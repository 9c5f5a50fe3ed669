package coordinator

import (
	"context"
	"testing"
	"time"

	"github.com/connect-kinesis/connect-kinesis/internal/consumer"
	"github.com/connect-kinesis/connect-kinesis/internal/consumer/consumertest"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// A graceful stop whose last acks take longer than lease.period keeps its
// lease meanwhile (renewals go on until the readers have drained), so its
// final commit lands and the instance taking over starts right after it.
func TestSlowGracefulStopCommitsItsFinalPosition(t *testing.T) {
	api := consumertest.NewKinesis()
	const shard = "shardId-000000000000"
	api.Add(shard, &consumertest.KinesisShard{Records: 5})
	cfg := testConfig()
	cfg.HandoffTimeout = 5 * time.Second
	st := consumertest.NewStore(cfg.LeasePeriod)
	a := startConsumer(t, cfg, api, st)
	var b *consumer.Batch
	select {
	case b = <-a.Batches():
	case <-time.After(10 * time.Second):
		t.Fatal("no batch delivered")
	}
	require.Len(t, b.Records, 5)

	// A second instance of the group is ready to take the shard as soon as
	// the stopping one's lease runs out.
	other := startConsumer(t, cfg, api, st)
	log := &acked{}
	go ackAll(t.Context(), other, log)

	closed := make(chan error, 1)
	go func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		closed <- a.Close(ctx)
	}()
	// The pipeline acks the in-flight batch 2.5 lease periods later.
	time.Sleep(5 * cfg.LeasePeriod / 2)
	b.Ack(nil)
	require.NoError(t, <-closed)

	p, ok, err := st.Checkpoint(t.Context(), shard)
	require.NoError(t, err)
	require.True(t, ok, "the stopping instance committed nothing")
	assert.Equal(t, consumertest.SeqOf(shard, 5), p.Sequence, "the final commit holds the last acked record")

	api.Add(shard, &consumertest.KinesisShard{Records: 8})
	require.Eventually(t, func() bool { return len(log.all()) >= 3 }, 10*time.Second, 10*time.Millisecond)
	assert.Equal(t, []string{shard + "/6", shard + "/7", shard + "/8"}, log.all(), "the next owner starts right after the final commit: no duplicates")
}
