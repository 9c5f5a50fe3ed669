package coordinator

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/connect-kinesis/connect-kinesis/internal/consumer/consumertest"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// With KPL de-aggregation the budget charges one measure at both ends
// (issue 33, item 2): a request is sized by what its records cost once
// split into user records, which is what they are charged when they
// arrive and given back when acked. Before the fix a request was sized by
// the raw aggregates (50 KB each) and charged by their 200 user records
// (about 4x as much), so 8 shards held 6x the 8 MiB budget.
func TestBudgetBoundsKPLAggregates(t *testing.T) {
	t.Parallel()
	const shards, records, members, memberSize = 8, 30, 200, 250
	api := consumertest.NewKinesis()
	for i := range shards {
		api.Add(fmt.Sprintf("shardId-%012d", i), &consumertest.KinesisShard{Records: records, Aggregate: members, MemberSize: memberSize, Behind: 1000})
	}
	cfg := testConfig()
	cfg.Deaggregate = true
	cfg.Limit = 10000
	cfg.MaxBufferedBytes = 8 << 20
	c := startConsumer(t, cfg, api, consumertest.NewStore(time.Minute))
	ctx, cancel := context.WithTimeout(t.Context(), 60*time.Second)
	defer cancel()
	want := shards * records * members
	for got := 0; got < want; {
		select {
		case b := <-c.Batches():
			got += len(b.Records)
			time.AfterFunc(20*time.Millisecond, func() { b.Ack(nil) })
		case <-ctx.Done():
			t.Fatalf("delivered %d of %d user records", got, want)
		}
	}
	peak := c.budget.PeakHeld()
	t.Logf("peak held %.1f MB of a %.1f MB budget (%.1fx)", float64(peak)/1e6, float64(cfg.MaxBufferedBytes)/1e6, float64(peak)/float64(cfg.MaxBufferedBytes))
	assert.LessOrEqual(t, peak, cfg.MaxBufferedBytes*5/4, "the budget holds what it let in")
	require.NoError(t, c.Close(ctx))
}
