package consumer

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/kinesis/types"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestLatestOnAFreshGroup(t *testing.T) {
	const (
		old   = "shardId-000000000000"
		left  = "shardId-000000000001"
		right = "shardId-000000000002"
		child = "shardId-000000000003"
	)
	api := newFakeKinesis()
	// An old split: the parent is closed, its children are open. All hold
	// records written before the consumer starts.
	api.add(old, &fakeShard{records: 10, closed: true})
	api.add(left, &fakeShard{records: 5, parent: old})
	api.add(right, &fakeShard{records: 5, parent: old})
	st := newFakeStore(time.Second)
	cfg := testConfig()
	cfg.StartPosition = StartLatest
	c := startConsumer(t, cfg, api, st)
	log := &acked{}
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	go ackAll(ctx, c, log)

	iterTypes := func() map[string]types.ShardIteratorType {
		api.mu.Lock()
		defer api.mu.Unlock()
		out := map[string]types.ShardIteratorType{}
		for _, r := range api.iterReqs {
			out[aws.ToString(r.ShardId)] = r.ShardIteratorType
		}
		return out
	}
	require.Eventually(t, func() bool { return len(iterTypes()) == 2 }, 10*time.Second, 10*time.Millisecond)
	assert.Equal(t, map[string]types.ShardIteratorType{left: types.ShardIteratorTypeLatest, right: types.ShardIteratorTypeLatest}, iterTypes(),
		"shards open at the start begin at LATEST; the closed parent is skipped")

	// New records arrive; then `left` is split again and its child gets
	// records: those are read from the child's start.
	api.mu.Lock()
	api.shards[left].records = 8
	api.mu.Unlock()
	require.Eventually(t, func() bool { return len(log.all()) == 3 }, 10*time.Second, 10*time.Millisecond)
	api.mu.Lock()
	api.shards[left].closed = true
	api.shards[child] = &fakeShard{records: 4, parent: left}
	api.mu.Unlock()
	require.Eventually(t, func() bool { return len(log.all()) == 7 }, 10*time.Second, 10*time.Millisecond)
	assert.Equal(t, types.ShardIteratorTypeTrimHorizon, iterTypes()[child])
	for _, d := range log.all() {
		assert.False(t, strings.HasPrefix(d, old+"/"), "nothing from the skipped parent")
	}
	assert.Equal(t, []string{left + "/6", left + "/7", left + "/8", child + "/1", child + "/2", child + "/3", child + "/4"}, log.all())
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
