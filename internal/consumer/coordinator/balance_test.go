package coordinator

import (
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
// balancing rounds against st, without a run loop.
func balancingCoordinator(st consumer.Store, owner string, shards []string) *coordinator {
	co := &coordinator{
		c:             &Consumer{cfg: testConfig(), owner: owner, metrics: consumer.NewMetrics(nil)},
		api:           consumertest.NewKinesis(),
		configured:    "s",
		streamName:    "s",
		store:         st,
		listed:        map[string]consumer.Shard{},
		unlistedSince: map[string]time.Time{},
		readers:       map[string]shardReader{},
		handedOff:     map[string]time.Time{},
		asked:         map[string]time.Time{},
		moved:         map[string]time.Time{},
		lastOwner:     map[string]string{},
	}
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
