package coordinator

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"testing"
	"time"

	"github.com/connect-kinesis/connect-kinesis/internal/consumer"
	"github.com/connect-kinesis/connect-kinesis/internal/consumer/consumertest"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// balancingCoordinator is a coordinator that has listed shards and runs
// balancing rounds against st, without a run loop. It is built as the
// consumer builds one, so that a reader a round starts has everything a
// reader uses (a Kinesis that has no such shard lists it, through the
// coordinator's retry).
func balancingCoordinator(st consumer.Store, owner string, shards []string) *coordinator {
	c := &Consumer{cfg: testConfig(), api: consumertest.NewKinesis(), owner: owner, metrics: consumer.NewMetrics(nil)}
	co := blankCoordinator(c, "s")
	co.streamName, co.store = "s", st
	for _, id := range shards {
		co.listed[id] = consumer.Shard{ID: id}
	}
	return co
}

func TestBalancingAsksForTheWholeShortfallInOneRound(t *testing.T) {
	st := consumertest.NewStore(time.Minute)
	var shards []string
	for i := range 12 {
		shards = append(shards, fmt.Sprintf("shardId-%012d", i))
	}
	// Two members read six shards each; a third joins with none.
	for i, id := range shards {
		owner := []string{"m1", "m2"}[i%2]
		_, err := st.Acquire(t.Context(), id, owner)
		require.NoError(t, err)
	}
	for _, m := range []string{"m1", "m2", "new"} {
		require.NoError(t, st.Heartbeat(t.Context(), m))
	}
	co := balancingCoordinator(st, "new", shards)

	co.rebalance(t.Context())

	// Its share is 12/3 = 4: it asks for all 4 in this one round, two from
	// each member, rather than one shard per round.
	asked := map[string]int{}
	for shard, requester := range st.Handoff {
		assert.Equal(t, "new", requester)
		asked[st.LeaseMap[shard].Owner]++
	}
	assert.Equal(t, map[string]int{"m1": 2, "m2": 2}, asked, "hand-offs asked for, by holder: %v", slices.Sorted(maps.Keys(st.Handoff)))
	assert.Empty(t, co.readers, "nothing is free to take meanwhile")
}

// A shard a balancing round takes that Kinesis does not know (trimmed, or
// of a stream deleted since) has its reader list the stream through the
// coordinator's retry, and the reader ends; it does not crash the process.
func TestBalancingTakesAShardKinesisNoLongerHas(t *testing.T) {
	st := consumertest.NewStore(time.Minute)
	require.NoError(t, st.Heartbeat(t.Context(), "a"))
	co := balancingCoordinator(st, "a", []string{"shardId-000000000000"})
	ctx, cancel := context.WithCancel(t.Context())
	co.runCtx = ctx
	t.Cleanup(func() { cancel(); close(co.runDone) })

	co.rebalance(t.Context())

	require.Contains(t, co.readers, "shardId-000000000000", "the round takes the free shard")
	select {
	case r := <-co.readerDone:
		assert.Equal(t, "shardId-000000000000", r.Shard().ID)
		assert.True(t, r.Outcome().ClosedShard, "ended as a trimmed shard, closed")
	case <-time.After(10 * time.Second):
		t.Fatal("the reader of a shard Kinesis does not have never ended")
	}
}
