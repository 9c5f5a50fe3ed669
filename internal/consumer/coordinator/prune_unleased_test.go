package coordinator

import (
	"context"
	"slices"
	"testing"
	"time"

	"github.com/connect-kinesis/connect-kinesis/internal/consumer"
	"github.com/connect-kinesis/connect-kinesis/internal/consumer/consumertest"
	"github.com/stretchr/testify/assert"
)

// listingStore is a consumertest.Store that lists the shards it holds a checkpoint
// of, as the Redis store does (one HKEYS).
type listingStore struct{ *consumertest.Store }

func (s listingStore) CheckpointedShards(context.Context) ([]string, error) {
	s.Mu.Lock()
	defer s.Mu.Unlock()
	var out []string
	for id := range s.Ckpt {
		out = append(out, id)
	}
	slices.Sort(out)
	return out, nil
}

// A checkpoint that a reset or an import wrote for a shard nobody ever
// leased is pruned once the stream no longer lists the shard, as a leased
// one is. Before, the prune built its set from leases and closed marks
// only, and the checkpoint stayed for ever.
func TestPruneRemovesACheckpointOfAShardNeverLeased(t *testing.T) {
	t.Parallel()
	api := consumertest.NewKinesis()
	api.Add("shardId-000000000001", &consumertest.KinesisShard{Records: 1})
	st := consumertest.NewStore(time.Second)
	st.Ckpt["shardId-000000000000"] = consumer.Position{Sequence: "42"} // an import's, for a shard since trimmed
	c := startConsumer(t, testConfig(), api, listingStore{st})
	go func() {
		for b := range c.Batches() {
			b.Ack(nil)
		}
	}()
	assert.Eventually(t, func() bool {
		st.Mu.Lock()
		defer st.Mu.Unlock()
		_, ok := st.Ckpt["shardId-000000000000"]
		return !ok
	}, 20*time.Second, 20*time.Millisecond, "the checkpoint of a shard never leased and no longer listed is pruned")
}
