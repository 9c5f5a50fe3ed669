package coordinator

import (
	"log/slog"
	"testing"
	"time"

	"github.com/connect-kinesis/connect-kinesis/internal/consumer"
	"github.com/connect-kinesis/connect-kinesis/internal/consumer/consumertest"
	"github.com/redpanda-data/benthos/v4/public/service"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// A budget whose queue does not move is logged within the stall time
// (a minute; shortened here), naming the shards that hold the room, not
// only after lag_warn_threshold (issue 33, item 5). Here the pipeline
// takes batches and never acks them, as an output batching policy with a
// count and no period larger than the budget does. Before the fix the
// only WARN came after lag_warn_threshold (12 h by default), and named no
// shard.
func TestBudgetWarnsOfAStallNamingHolders(t *testing.T) {
	t.Parallel()
	var logs consumertest.SyncBuffer
	api := consumertest.NewKinesis()
	const shard = "shardId-000000000000"
	api.Add(shard, &consumertest.KinesisShard{Records: 1000, Behind: 1000})
	cfg := testConfig()
	cfg.Limit = 100
	cfg.MaxBufferedBytes = 64 << 10
	cfg.ShardMaxInFlight = 100 // only the budget holds the shard back
	c, err := New(cfg, api, func(string) consumer.Store { return consumertest.NewStore(time.Minute) }, service.NewLoggerFromSlog(slog.New(slog.NewTextHandler(&logs, nil))), nil)
	require.NoError(t, err)
	c.budget.SetStallAfter(300 * time.Millisecond)
	require.NoError(t, c.Start(t.Context()))
	t.Cleanup(func() { _ = c.Close(t.Context()) })

	var kept []*consumer.Batch // taken, never acked
	const warning = "has let no shard in for"
	require.Eventually(t, func() bool {
		select {
		case b := <-c.Batches():
			kept = append(kept, b)
		default:
		}
		return logs.Count(warning) == 1
	}, 20*time.Second, 5*time.Millisecond, "a stall is logged: %s", logs.String())
	assert.Contains(t, logs.String(), "s/"+shard+" (", "names the shard holding the room")
	t.Logf("%d batches kept; log: %s", len(kept), logs.String())

	for _, b := range kept {
		b.Ack(nil)
	}
	assert.Eventually(t, func() bool { return logs.Count("lets shards in again") == 1 }, 10*time.Second, 10*time.Millisecond)
}
