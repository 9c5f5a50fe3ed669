package consumer

import (
	"context"
	"slices"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
)

// listingStore is a fakeStore that lists the shards it holds a checkpoint
// of, as the Redis store does (one HKEYS).
type listingStore struct{ *fakeStore }

func (s listingStore) CheckpointedShards(context.Context) ([]string, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	var out []string
	for id := range s.ckpt {
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
	api := newFakeKinesis()
	api.add("shardId-000000000001", &fakeShard{records: 1})
	st := newFakeStore(time.Second)
	st.ckpt["shardId-000000000000"] = Position{Sequence: "42"} // an import's, for a shard since trimmed
	c := startConsumer(t, testConfig(), api, listingStore{st})
	go func() {
		for b := range c.Batches() {
			b.Ack(nil)
		}
	}()
	assert.Eventually(t, func() bool {
		st.mu.Lock()
		defer st.mu.Unlock()
		_, ok := st.ckpt["shardId-000000000000"]
		return !ok
	}, 20*time.Second, 20*time.Millisecond, "the checkpoint of a shard never leased and no longer listed is pruned")
}
