package consumer

import (
	"context"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/kinesis/types"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestLatestStartsEveryShardAtTheGroupsStart(t *testing.T) {
	const (
		old   = "shardId-000000000000"
		left  = "shardId-000000000001"
		right = "shardId-000000000002"
	)
	api := newFakeKinesis()
	// An old split: the parent is closed, its children are open.
	api.add(old, &fakeShard{records: 3, closed: true})
	api.add(left, &fakeShard{records: 2, parent: old})
	api.add(right, &fakeShard{records: 2, parent: old})
	st := newFakeStore(time.Second)
	st.start = time.Date(2024, 5, 1, 12, 0, 0, 0, time.UTC)
	cfg := testConfig()
	cfg.StartPosition = StartLatest
	c := startConsumer(t, cfg, api, st)
	log := &acked{}
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	go ackAll(ctx, c, log)

	// The closed parent is read (from the group's start to its end) and
	// closed before its children start; every shard without a checkpoint
	// starts at the group's start, whoever takes it and however often.
	require.Eventually(t, func() bool { return len(log.all()) == 7 }, 10*time.Second, 10*time.Millisecond)
	api.mu.Lock()
	defer api.mu.Unlock()
	started := map[string]bool{}
	for _, r := range api.iterReqs {
		started[aws.ToString(r.ShardId)] = true
		assert.Equal(t, types.ShardIteratorTypeAtTimestamp, r.ShardIteratorType, aws.ToString(r.ShardId))
		assert.Equal(t, st.start.Add(-LatestSkewMargin), aws.ToTime(r.Timestamp), aws.ToString(r.ShardId))
	}
	assert.Equal(t, map[string]bool{old: true, left: true, right: true}, started)
	assert.Equal(t, old+"/1", log.all()[0], "the parent is read before its children")
}

func TestAtTimestampUsesTheTimeForShardsWithoutCheckpoint(t *testing.T) {
	api := newFakeKinesis()
	const shard = "shardId-000000000000"
	api.add(shard, &fakeShard{records: 3})
	cfg := testConfig()
	cfg.StartPosition = StartAtTimestamp
	cfg.StartTimestamp = time.Date(2024, 5, 1, 12, 0, 0, 0, time.UTC)
	c := startConsumer(t, cfg, api, newFakeStore(time.Second))
	select {
	case b := <-c.Batches():
		b.Ack(nil)
	case <-time.After(10 * time.Second):
		t.Fatal("no batch")
	}
	api.mu.Lock()
	defer api.mu.Unlock()
	require.NotEmpty(t, api.iterReqs)
	assert.Equal(t, types.ShardIteratorTypeAtTimestamp, api.iterReqs[0].ShardIteratorType)
	assert.Equal(t, cfg.StartTimestamp, aws.ToTime(api.iterReqs[0].Timestamp))
}

// A shard's own start (an import of a KCL lease at TRIM_HORIZON) comes
// before the group's override and the configured start_position, and a
// checkpoint before all of them.
func TestResolveStartShardStartFirst(t *testing.T) {
	co := &coordinator{c: &Consumer{cfg: Config{StartPosition: StartLatest}}}
	ts := time.UnixMilli(1_700_000_000_000)
	group := &StartOverride{Mode: StartAtTimestamp, Timestamp: ts}
	own := &StartOverride{Mode: StartTrimHorizon}

	assert.Equal(t, types.ShardIteratorTypeTrimHorizon, co.resolveStart(Take{Override: group, ShardStart: own}).iterType)
	assert.Equal(t, startSpec{iterType: types.ShardIteratorTypeAtTimestamp, timestamp: ts}, co.resolveStart(Take{Override: group}))
	assert.Equal(t, after("7"), co.resolveStart(Take{Checkpoint: Position{Sequence: "7"}, ShardStart: own}))
}
