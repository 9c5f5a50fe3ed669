package coordinator

import (
	"testing"
	"time"

	"github.com/connect-kinesis/connect-kinesis/internal/consumer/consumertest"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// An idle shard polls with the configured limit, and a burst after it is
// read in one call, with no ramp-up (issue 33, item 7). Before the fix,
// after an empty answer the record estimate was still the 1 MiB default,
// so the grant held one record: Limit=1, then 1023, 2046, ... as the
// burst came in.
func TestBudgetIdleShardPollsAtLimit(t *testing.T) {
	t.Parallel()
	const shard, limit = "shardId-000000000000", 10000
	api := consumertest.NewKinesis()
	sh := &consumertest.KinesisShard{}
	api.Add(shard, sh)
	cfg := testConfig()
	cfg.Limit = limit
	cfg.MaxBufferedBytes = 256 << 20
	c := startConsumer(t, cfg, api, consumertest.NewStore(time.Minute))
	require.Eventually(t, func() bool { return len(api.CallTimes(shard)) >= 3 }, 10*time.Second, 10*time.Millisecond, "the idle shard polls")

	api.Mu.Lock()
	sh.Records = 5000 // a burst
	api.Mu.Unlock()
	got := 0
	for got < 5000 {
		select {
		case b := <-c.Batches():
			got += len(b.Records)
			b.Ack(nil)
		case <-time.After(10 * time.Second):
			t.Fatalf("delivered %d of 5000", got)
		}
	}
	api.Mu.Lock()
	limits := append([]int32(nil), api.Limits[shard]...)
	api.Mu.Unlock()
	t.Logf("GetRecords limits: %v", limits)
	for i, l := range limits {
		assert.Equal(t, int32(limit), l, "call %d", i)
	}
}
