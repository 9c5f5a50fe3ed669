package coordinator

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/service/kinesis"
	"github.com/aws/aws-sdk-go-v2/service/kinesis/types"
	"github.com/aws/smithy-go"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/connect-kinesis/connect-kinesis/internal/consumer"
	"github.com/connect-kinesis/connect-kinesis/internal/consumer/budget"
	"github.com/connect-kinesis/connect-kinesis/internal/consumer/consumertest"
	"github.com/connect-kinesis/connect-kinesis/internal/consumer/source"
	"github.com/connect-kinesis/connect-kinesis/internal/kinesisx"
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

// The same with enhanced fan-out: a shard whose subscribe keeps failing
// (here ResourceInUse, as for minutes after a reader was killed) holds no
// room while it retries, so a healthy subscription behind it in the queue
// reads on. The budget holds a little more than one subscription's ask.
func TestBudgetFailingSubscriptionHoldsNoRoom(t *testing.T) {
	t.Parallel()
	const records, perEvent, size = 40, 2, 8 << 10
	ctx, cancel := context.WithTimeout(t.Context(), 60*time.Second)
	defer cancel()
	healthy, failing := "shardId-000000000000", "shardId-000000000001"
	api := &consumertest.EFOBacklog{Records: records, PerEvent: perEvent, Size: size, Shards: map[string]*consumertest.EFOShard{healthy: {}}}
	ids := []string{failing, healthy}
	co := balancingCoordinator(consumertest.NewStore(time.Minute), "me", ids)
	co.runCtx = ctx
	for _, id := range ids {
		co.api.(*consumertest.Kinesis).Add(id, &consumertest.KinesisShard{Records: records})
	}
	co.c.out = make(chan *consumer.Batch)
	co.c.budget = budget.New(budget.WhileReading(budget.MinEventBytes)+budget.WhileReading(budget.MinEventBytes)/2, co.c.metrics)
	bo := kinesisx.Backoff{InitialInterval: 10 * time.Millisecond, MaxInterval: 20 * time.Millisecond}
	co.c.cfg.Backoff = bo
	co.fanOut = source.NewStreamConsumer(consumertest.NewConsumers(consumertest.ConsumerARN), consumertest.StreamARN, consumer.EnhancedFanOut{Enabled: true, ConsumerName: "c"}, bo, nil)
	co.fanOut.arn, co.fanOut.stale = consumertest.ConsumerARN, false
	inUse := func(context.Context, *kinesis.SubscribeToShardInput) (source.EventStream, error) {
		return nil, &smithy.GenericAPIError{Code: kinesisx.CodeResourceInUse, Message: "Another active subscription exists for this consumer"}
	}

	var readers sync.WaitGroup
	start := source.Start{IterType: types.ShardIteratorTypeTrimHorizon}
	for _, id := range ids { // the failing shard asks first
		r := newShardReader(co, co.listed[id], consumer.Lease{Shard: id, Owner: "me", Token: 1}, start)
		sub := api.Subscribe(id)
		if id == failing {
			sub = inUse
		}
		r.openSource = func() source.RecordSource {
			s := newSubscriptionSource(co, sub, id, start, r.log)
			s.room = r.budget
			return s
		}
		co.readers[id] = r
		readers.Go(func() {
			defer r.budget.close()
			r.read()
		})
		time.Sleep(50 * time.Millisecond)
	}
	p := &consumertest.Pausable{Api: api, Hold: time.Millisecond, Got: map[string][]string{}}
	go p.Run(ctx, co.c.out)
	ok := assert.Eventually(t, func() bool { _, n := p.Delivered(); return n >= records }, 20*time.Second, 10*time.Millisecond)
	_, n := p.Delivered()
	held, waiting, _ := co.c.budget.State()
	t.Logf("the healthy subscription delivered %d of %d records; the budget holds %d bytes, %d shards wait", n, records, held, waiting)
	cancel()
	readers.Wait()
	require.True(t, ok)
}
