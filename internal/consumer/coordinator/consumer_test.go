package coordinator

import (
	"context"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/kinesis/types"
	"github.com/redpanda-data/benthos/v4/public/service"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/connect-kinesis/connect-kinesis/internal/consumer"
	"github.com/connect-kinesis/connect-kinesis/internal/consumer/consumertest"
)

func testConfig() consumer.Config { return consumertest.Config() }

func startConsumer(t *testing.T, cfg consumer.Config, api consumer.KinesisAPI, st consumer.Store) *Consumer {
	t.Helper()
	return startConsumerWithMetrics(t, cfg, api, st, nil)
}

// startConsumerWithMetrics is startConsumer reporting to m.
func startConsumerWithMetrics(t *testing.T, cfg consumer.Config, api consumer.KinesisAPI, st consumer.Store, m *service.Metrics) *Consumer {
	t.Helper()
	c, err := New(cfg, api, func(string) consumer.Store { return st }, nil, m)
	require.NoError(t, err)
	require.NoError(t, c.Start(t.Context()))
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		_ = c.Close(ctx)
		if c.budget != nil {
			// Issue 59 item 1: the budget's invariant held throughout.
			assert.Zero(t, c.budget.Leaked(), "the byte budget held room once no reader held anything")
		}
	})
	return c
}

// acked is the log of records whose batch was acked, in ack order.
type acked struct {
	mu   sync.Mutex
	data []string
}

func (a *acked) add(b *consumer.Batch) {
	a.mu.Lock()
	defer a.mu.Unlock()
	for _, r := range b.Records {
		a.data = append(a.data, string(r.Data))
	}
}

func (a *acked) all() []string {
	a.mu.Lock()
	defer a.mu.Unlock()
	return append([]string(nil), a.data...)
}

// ackAll acks every batch as it arrives until ctx ends.
func ackAll(ctx context.Context, c *Consumer, log *acked) {
	for {
		select {
		case b := <-c.Batches():
			log.add(b)
			b.Ack(nil)
		case <-ctx.Done():
			return
		}
	}
}

func TestConsumerReadsMergeChildOnlyAfterBothParentsAreAcked(t *testing.T) {
	api := consumertest.NewKinesis()
	api.Add("shardId-000000000000", &consumertest.KinesisShard{Records: 25, Closed: true})
	api.Add("shardId-000000000001", &consumertest.KinesisShard{Records: 35, Closed: true})
	api.Add("shardId-000000000002", &consumertest.KinesisShard{Records: 20, Parent: "shardId-000000000000", Adjacent: "shardId-000000000001"})
	st := consumertest.NewStore(time.Second)
	c := startConsumer(t, testConfig(), api, st)
	log := &acked{}
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	go ackAll(ctx, c, log)
	require.Eventually(t, func() bool { return len(log.all()) == 80 }, 20*time.Second, 20*time.Millisecond)

	got := log.all()
	firstChild := -1
	lastParent := -1
	for i, d := range got {
		if strings.HasPrefix(d, "shardId-000000000002/") {
			if firstChild < 0 {
				firstChild = i
			}
		} else {
			lastParent = i
		}
	}
	assert.Less(t, lastParent, firstChild, "every parent record is acked before the child is read")
	st.Mu.Lock()
	defer st.Mu.Unlock()
	assert.True(t, st.Closed["shardId-000000000000"])
	assert.True(t, st.Closed["shardId-000000000001"])
	assert.False(t, st.Closed["shardId-000000000002"], "an open shard is never closed")
}

func TestConsumerPacesGetRecordsPerShard(t *testing.T) {
	api := consumertest.NewKinesis()
	const shard = "shardId-000000000000"
	// Always more data and a limit of 1: the reader would call as fast as
	// it can if pacing did not hold it back.
	api.Add(shard, &consumertest.KinesisShard{Records: 1000000})
	cfg := testConfig()
	cfg.Limit = 1
	c := startConsumer(t, cfg, api, consumertest.NewStore(time.Second))
	log := &acked{}
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	go ackAll(ctx, c, log)
	require.Eventually(t, func() bool { return len(api.CallTimes(shard)) >= 12 }, 20*time.Second, 20*time.Millisecond)

	calls := api.CallTimes(shard)
	// No window of six calls may be shorter than a second (5 calls/s), with
	// a little slack for the time between the reader's clock and the fake's.
	for i := 0; i+5 < len(calls); i++ {
		assert.GreaterOrEqual(t, calls[i+5].Sub(calls[i]), 950*time.Millisecond, "six calls within a second at call %d", i)
	}
}

func TestConsumerRenewsExpiredIteratorAfterLastDelivered(t *testing.T) {
	api := consumertest.NewKinesis()
	const shard = "shardId-000000000000"
	api.Add(shard, &consumertest.KinesisShard{Records: 50})
	api.ExpireAt[shard] = 3 // after two batches of 10
	c := startConsumer(t, testConfig(), api, consumertest.NewStore(time.Second))
	log := &acked{}
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	go ackAll(ctx, c, log)
	require.Eventually(t, func() bool { return len(log.all()) == 50 }, 20*time.Second, 20*time.Millisecond)

	for i, d := range log.all() {
		assert.Equal(t, shard+"/"+itoa(i+1), d, "records once each, in order")
	}
	api.Mu.Lock()
	defer api.Mu.Unlock()
	require.Len(t, api.IterReqs, 2)
	assert.Equal(t, types.ShardIteratorTypeTrimHorizon, api.IterReqs[0].ShardIteratorType)
	assert.Equal(t, types.ShardIteratorTypeAfterSequenceNumber, api.IterReqs[1].ShardIteratorType)
	assert.Equal(t, consumertest.SeqOf(shard, 20), aws.ToString(api.IterReqs[1].StartingSequenceNumber))
}

func TestConsumerLeaseLostMidBatchCommitsNothing(t *testing.T) {
	api := consumertest.NewKinesis()
	const shard = "shardId-000000000000"
	api.Add(shard, &consumertest.KinesisShard{Records: 30})
	st := consumertest.NewStore(600 * time.Millisecond)
	c := startConsumer(t, testConfig(), api, st)

	var b *consumer.Batch
	select {
	case b = <-c.Batches():
	case <-time.After(10 * time.Second):
		t.Fatal("no batch delivered")
	}
	c.mu.Lock()
	r := c.coords[0].readerFor(shard)
	c.mu.Unlock()
	require.NotNil(t, r)
	// The lease is taken by another instance while the batch is in the
	// pipeline; the next renewal finds out.
	st.Mu.Lock()
	st.LoseOnRenew[shard] = true
	st.Mu.Unlock()
	require.Eventually(t, r.Lost, 10*time.Second, 10*time.Millisecond)
	calls := len(api.CallTimes(shard))
	b.Ack(nil)
	select {
	case <-r.Done(): // the reader and its committer have stopped
	case <-time.After(10 * time.Second):
		t.Fatal("the reader did not stop after losing its lease")
	}
	assert.Empty(t, st.CommitLog(), "a reader that lost its lease commits nothing, not even the batch acked late")
	assert.Equal(t, calls, len(api.CallTimes(shard)), "it reads nothing more either")
	select {
	case extra := <-c.Batches():
		t.Fatalf("a batch from shard %s was delivered after the lease was lost", extra.Shard)
	default:
	}
}

func TestConsumerCommitsAndResumesAfterCheckpoint(t *testing.T) {
	api := consumertest.NewKinesis()
	const shard = "shardId-000000000000"
	api.Add(shard, &consumertest.KinesisShard{Records: 30})
	st := consumertest.NewStore(time.Second)
	c := startConsumer(t, testConfig(), api, st)
	log := &acked{}
	ctx, cancel := context.WithCancel(t.Context())
	go ackAll(ctx, c, log)
	require.Eventually(t, func() bool { return len(log.all()) == 30 }, 10*time.Second, 10*time.Millisecond)
	cancel()
	closeCtx, done := context.WithTimeout(t.Context(), 5*time.Second)
	defer done()
	require.NoError(t, c.Close(closeCtx))
	p, ok, _ := st.Checkpoint(t.Context(), shard)
	require.True(t, ok)
	assert.Equal(t, consumertest.SeqOf(shard, 30), p.Sequence, "close commits the last acked record")

	api.Add(shard, &consumertest.KinesisShard{Records: 35})
	c2 := startConsumer(t, testConfig(), api, st)
	log2 := &acked{}
	go ackAll(t.Context(), c2, log2)
	require.Eventually(t, func() bool { return len(log2.all()) == 5 }, 10*time.Second, 10*time.Millisecond)
	assert.Equal(t, shard+"/31", log2.all()[0], "a restart resumes right after the checkpoint")
}

func TestConfigValidateNamesTheField(t *testing.T) {
	for _, tc := range []struct {
		field  string
		mutate func(*consumer.Config)
	}{
		{"streams", func(c *consumer.Config) { c.Streams = nil }},
		{"start_position", func(c *consumer.Config) { c.StartPosition = "earliest" }},
		{"start_timestamp", func(c *consumer.Config) { c.StartPosition = consumer.StartAtTimestamp }},
		{"shard_max_in_flight", func(c *consumer.Config) { c.ShardMaxInFlight = 0 }},
		{"limit", func(c *consumer.Config) { c.Limit = 10001 }},
		{"poll_interval", func(c *consumer.Config) { c.PollInterval = 100 * time.Millisecond }},
		{"idle_poll_interval", func(c *consumer.Config) { c.IdlePollInterval = 0 }},
	} {
		t.Run(tc.field, func(t *testing.T) {
			cfg := testConfig()
			tc.mutate(&cfg)
			err := cfg.Validate()
			require.Error(t, err)
			assert.Contains(t, err.Error(), "field "+tc.field)
		})
	}
	assert.NoError(t, testConfig().Validate())
}

func itoa(i int) string { return strconv.Itoa(i) }

// readerOf is the reader that delivered b, while it reads its shard.
func readerOf(c *Consumer, b *consumer.Batch) shardReader {
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, co := range c.coords {
		if co.streamName == b.Stream {
			return co.readerFor(b.Shard)
		}
	}
	return nil
}
