package coordinator

import (
	"context"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/kinesis/types"
	"github.com/connect-kinesis/connect-kinesis/internal/consumer"
	"github.com/connect-kinesis/connect-kinesis/internal/consumer/consumertest"
	"github.com/connect-kinesis/connect-kinesis/internal/consumer/source"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestLatestStartsEveryShardAtTheGroupsStart(t *testing.T) {
	const (
		old   = "shardId-000000000000"
		left  = "shardId-000000000001"
		right = "shardId-000000000002"
	)
	api := consumertest.NewKinesis()
	// An old split: the parent is closed, its children are open.
	api.Add(old, &consumertest.KinesisShard{Records: 3, Closed: true})
	api.Add(left, &consumertest.KinesisShard{Records: 2, Parent: old})
	api.Add(right, &consumertest.KinesisShard{Records: 2, Parent: old})
	st := consumertest.NewStore(time.Second)
	st.Start = time.Date(2024, 5, 1, 12, 0, 0, 0, time.UTC)
	cfg := testConfig()
	cfg.StartPosition = consumer.StartLatest
	c := startConsumer(t, cfg, api, st)
	log := &acked{}
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	go ackAll(ctx, c, log)

	// The closed parent is read (from the group's start to its end) and
	// closed before its children start; every shard without a checkpoint
	// starts at the group's start, whoever takes it and however often.
	require.Eventually(t, func() bool { return len(log.all()) == 7 }, 10*time.Second, 10*time.Millisecond)
	api.Mu.Lock()
	defer api.Mu.Unlock()
	started := map[string]bool{}
	for _, r := range api.IterReqs {
		started[aws.ToString(r.ShardId)] = true
		assert.Equal(t, types.ShardIteratorTypeAtTimestamp, r.ShardIteratorType, aws.ToString(r.ShardId))
		assert.Equal(t, st.Start.Add(-consumer.LatestSkewMargin), aws.ToTime(r.Timestamp), aws.ToString(r.ShardId))
	}
	assert.Equal(t, map[string]bool{old: true, left: true, right: true}, started)
	assert.Equal(t, old+"/1", log.all()[0], "the parent is read before its children")
}

func TestAtTimestampUsesTheTimeForShardsWithoutCheckpoint(t *testing.T) {
	api := consumertest.NewKinesis()
	const shard = "shardId-000000000000"
	api.Add(shard, &consumertest.KinesisShard{Records: 3})
	cfg := testConfig()
	cfg.StartPosition = consumer.StartAtTimestamp
	cfg.StartTimestamp = time.Date(2024, 5, 1, 12, 0, 0, 0, time.UTC)
	c := startConsumer(t, cfg, api, consumertest.NewStore(time.Second))
	select {
	case b := <-c.Batches():
		b.Ack(nil)
	case <-time.After(10 * time.Second):
		t.Fatal("no batch")
	}
	api.Mu.Lock()
	defer api.Mu.Unlock()
	require.NotEmpty(t, api.IterReqs)
	assert.Equal(t, types.ShardIteratorTypeAtTimestamp, api.IterReqs[0].ShardIteratorType)
	assert.Equal(t, cfg.StartTimestamp, aws.ToTime(api.IterReqs[0].Timestamp))
}

// A shard's own start (an import of a KCL lease at TRIM_HORIZON) comes
// before the group's override and the configured start_position, and a
// checkpoint before all of them.
func TestResolveStartShardStartFirst(t *testing.T) {
	co := &coordinator{c: &Consumer{cfg: consumer.Config{StartPosition: consumer.StartLatest}}}
	ts := time.UnixMilli(1_700_000_000_000)
	group := &consumer.StartOverride{Mode: consumer.StartAtTimestamp, Timestamp: ts}
	own := &consumer.StartOverride{Mode: consumer.StartTrimHorizon}

	assert.Equal(t, types.ShardIteratorTypeTrimHorizon, co.resolveStart(consumer.Take{Override: group, ShardStart: own}).IterType)
	assert.Equal(t, source.Start{IterType: types.ShardIteratorTypeAtTimestamp, Timestamp: ts}, co.resolveStart(consumer.Take{Override: group}))
	assert.Equal(t, source.After("7"), co.resolveStart(consumer.Take{Checkpoint: consumer.Position{Sequence: "7"}, ShardStart: own}))
}
