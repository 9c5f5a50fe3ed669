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

// Guards the cause of TestThreeConsumersSettleOnFairShares's flake by
// count: a request stays in the store until it is met, and a holder
// honoured one left from a shortfall its requester had made up since, so a
// group settled at 2, 1, 1 moved a shard to 1, 1, 2.
func TestByCountALeftoverRequestDoesNotMoveASettledShard(t *testing.T) {
	st := consumertest.NewStore(time.Minute)
	var shards []string
	for i := range 4 {
		shards = append(shards, fmt.Sprintf("shardId-%012d", i))
	}
	for i, owner := range []string{"a", "a", "b", "c"} {
		_, err := st.Acquire(t.Context(), shards[i], owner)
		require.NoError(t, err)
	}
	for _, m := range []string{"a", "b", "c"} {
		require.NoError(t, st.Heartbeat(t.Context(), m))
	}
	co := balancingCoordinator(st, "a", shards)
	co.c.cfg.Balance = consumer.BalanceCount
	for _, id := range shards[:2] {
		co.c.api.(*consumertest.Kinesis).Add(id, &consumertest.KinesisShard{Records: 1000})
	}
	ctx, cancel := context.WithCancel(t.Context())
	co.runCtx = ctx
	t.Cleanup(func() { cancel(); close(co.runDone) })
	// a reads its two shards (as after taking them), then finds c's
	// leftover request for one.
	for _, id := range shards[:2] {
		st.Mu.Lock()
		delete(st.LeaseMap, id)
		st.Mu.Unlock()
	}
	co.rebalance(t.Context())
	require.Len(t, co.readers, 2, "a reads its two shards")
	require.NoError(t, st.RequestHandoff(t.Context(), shards[0], "c"))

	co.rebalance(t.Context())

	for id, r := range co.readers {
		assert.False(t, r.Stopping(), "a handed %s over to c, which holds one shard to a's two", id)
	}
}
