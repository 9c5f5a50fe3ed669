package reader

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/service/kinesis"
	"github.com/aws/aws-sdk-go-v2/service/kinesis/types"
	"github.com/aws/smithy-go"
	"github.com/redpanda-data/benthos/v4/public/service"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/connect-kinesis/connect-kinesis/internal/consumer"
	"github.com/connect-kinesis/connect-kinesis/internal/consumer/budget"
	"github.com/connect-kinesis/connect-kinesis/internal/consumer/consumertest"
	"github.com/connect-kinesis/connect-kinesis/internal/consumer/source"
	"github.com/connect-kinesis/connect-kinesis/internal/kinesisx"
)

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
	kin := consumertest.NewKinesis()
	for _, id := range ids {
		kin.Add(id, &consumertest.KinesisShard{Records: records})
	}
	cfg := consumertest.Config()
	bo := kinesisx.Backoff{InitialInterval: 10 * time.Millisecond, MaxInterval: 20 * time.Millisecond}
	cfg.Backoff = bo
	sc := source.NewStreamConsumer(consumertest.NewConsumers(consumertest.ConsumerARN), consumertest.StreamARN, consumer.EnhancedFanOut{Enabled: true, ConsumerName: "c"}, bo, nil)
	_, err := sc.Resolve(ctx)
	require.NoError(t, err)
	out := make(chan *consumer.Batch)
	st := testStream(ctx, &cfg, kin, consumertest.NewStore(time.Minute), out)
	st.Budget = budget.New(budget.WhileReading(budget.MinEventBytes)+budget.WhileReading(budget.MinEventBytes)/2, st.Metrics)
	st.Push = true
	inUse := func(context.Context, *kinesis.SubscribeToShardInput) (source.EventStream, error) {
		return nil, &smithy.GenericAPIError{Code: kinesisx.CodeResourceInUse, Message: "Another active subscription exists for this consumer"}
	}
	st.OpenSource = func(shard string, from source.Start, log *service.Logger, room source.Room) source.RecordSource {
		var sub source.SubscribeFunc = inUse
		if shard != failing {
			healthy := api.Subscribe(shard)
			sub = func(ctx context.Context, in *kinesis.SubscribeToShardInput) (source.EventStream, error) {
				return healthy(ctx, in)
			}
		}
		return source.NewSubscription(source.Params{API: kin, Stream: "s", Shard: shard, From: from, Config: &cfg, Log: log, Room: room}, sc, sub)
	}

	var readers sync.WaitGroup
	start := source.Start{IterType: types.ShardIteratorTypeTrimHorizon}
	for _, id := range ids { // the failing shard asks first
		r := New(st, consumer.Shard{ID: id}, consumer.Lease{Shard: id, Owner: "me", Token: 1}, start)
		readers.Go(func() {
			defer r.budget.Close()
			r.read()
		})
		time.Sleep(50 * time.Millisecond)
	}
	p := &consumertest.Pausable{API: api, Hold: time.Millisecond, Got: map[string][]string{}}
	go p.Run(ctx, out)
	ok := assert.Eventually(t, func() bool { _, n := p.Delivered(); return n >= records }, 20*time.Second, 10*time.Millisecond)
	_, n := p.Delivered()
	held, waiting, _ := st.Budget.State()
	t.Logf("the healthy subscription delivered %d of %d records; the budget holds %d bytes, %d shards wait", n, records, held, waiting)
	cancel()
	readers.Wait()
	require.True(t, ok)
}
