package coordinator

import (
	"fmt"
	"testing"
	"time"

	"github.com/aws/smithy-go"
	"github.com/connect-kinesis/connect-kinesis/internal/consumer/consumertest"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// A shard whose reads keep failing holds no room in the budget, so the
// healthy shards behind it in the queue read on (issue 33, item 1). Before
// the fix the failing shard took its grant before GetRecords and kept it
// while the source retried inside Next: the healthy shard delivered 0 of
// 400 records, at a 4 MiB budget with one failing shard and at the
// defaults (limit 10000, 256 MiB) with ten.
func TestBudgetFailingShardHoldsNoRoom(t *testing.T) {
	for _, tc := range []struct {
		name    string
		budget  int64
		limit   int
		failing int
	}{
		{"4MiB, 1 failing", 4 << 20, 100, 1},
		{"defaults, 12 failing", 256 << 20, 10000, 12},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			const records = 400
			api := consumertest.NewKinesis()
			healthy := "shardId-000000000099" // taken after the failing ones
			api.Add(healthy, &consumertest.KinesisShard{Records: records})
			denied := &smithy.GenericAPIError{Code: "AccessDeniedException", Message: "User is not authorized to perform kinesis:GetRecords"}
			for i := 1; i <= tc.failing; i++ {
				id := fmt.Sprintf("shardId-%012d", i)
				api.Add(id, &consumertest.KinesisShard{Records: records})
				api.GetErrors[id] = denied
			}
			cfg := testConfig()
			cfg.Limit = tc.limit
			cfg.MaxBufferedBytes = tc.budget
			c := startConsumer(t, cfg, api, consumertest.NewStore(time.Minute))
			got := 0
			deadline := time.After(20 * time.Second)
			for got < records {
				select {
				case b := <-c.Batches():
					require.Equal(t, healthy, b.Shard)
					got += len(b.Records)
					b.Ack(nil)
				case <-deadline:
					held, waiting, _ := c.budget.State()
					t.Fatalf("the healthy shard delivered %d of %d records; the budget holds %d bytes, %d shards wait", got, records, held, waiting)
				}
			}
			assert.Equal(t, records, got)
		})
	}
}
