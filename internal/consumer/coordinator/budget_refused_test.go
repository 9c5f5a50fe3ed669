package coordinator

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/connect-kinesis/connect-kinesis/internal/consumer"
	"github.com/connect-kinesis/connect-kinesis/internal/consumer/consumertest"
)

// Guards issue 59 item 1 through the consumer: readers that end with a
// batch Admit refused on its first delivery (the lease lost as the batch
// reached Next) leave nothing charged in the input's byte budget once the
// consumer is closed. Before the fix each such reader left its batch's
// cost in the budget for good.
func TestReadersEndingWithARefusedBatchDrainTheBudget(t *testing.T) {
	t.Parallel()
	const shard = "shardId-000000000000"
	api := consumertest.NewKinesis()
	api.Add(shard, &consumertest.KinesisShard{Records: 200})
	cfg := testConfig()
	cfg.MaxBufferedBytes = 64 << 20
	// The store's leases last cfg.LeasePeriod: a lost reader's lease lapses
	// soon, and the shard is taken again (a live lease is never taken, not
	// even under the taker's own id).
	c, err := New(cfg, api, func(string) consumer.Store { return consumertest.NewStore(cfg.LeasePeriod) }, nil, nil)
	require.NoError(t, err)
	require.NoError(t, c.Start(t.Context()))

	const refused = 5
	var prev shardReader
	for i := range refused {
		var r shardReader
		require.Eventually(t, func() bool {
			r = readerOf(c, &consumer.Batch{Stream: "s", Shard: shard})
			return r != nil && r != prev
		}, 10*time.Second, 5*time.Millisecond, "no reader %d", i)
		prev = r
		// The reader waits in its send, as it does while the pipeline is
		// busy; its lease is lost as Next takes the batch.
		time.Sleep(50 * time.Millisecond)
		var b *consumer.Batch
		select {
		case b = <-c.Batches():
		case <-time.After(10 * time.Second):
			t.Fatalf("no batch for refusal %d", i)
		}
		r.MarkLost()
		require.False(t, b.Admit(), "a batch of a lost lease was admitted")
		select {
		case <-r.Done():
		case <-time.After(10 * time.Second):
			t.Fatal("the lost reader did not end")
		}
	}
	ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
	defer cancel()
	require.NoError(t, c.Close(ctx))
	assert.NoError(t, c.budget.Drained(), "%d readers ended with a refused batch, and the consumer is closed", refused)
}
