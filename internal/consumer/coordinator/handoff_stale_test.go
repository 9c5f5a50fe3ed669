package coordinator

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/connect-kinesis/connect-kinesis/internal/consumer"
	"github.com/connect-kinesis/connect-kinesis/internal/consumer/consumertest"
)

// Guards the hand-off by load held back while the holder cools down: the
// holder's cool-down (six balancing periods, 60 s at the defaults) outlasts
// the asker's wait for the shard, and the request stayed in the store, so
// the holder released the shard after the asker had stopped waiting for
// it; the asker, at its quota by count, did not take it, and the shard was
// left unowned. A request lapses in the store before its asker stops
// waiting (consumer.HandoffRequestMaxAge), so a holder either hands the
// shard over while its asker still takes it or not at all; the asker then
// asks again, and that request is honoured.
func TestByLoadAHandOffHeldBackByACoolDownIsTakenByItsAsker(t *testing.T) {
	st := consumertest.NewStore(time.Minute)
	shards, co := byLoadPair(t, st, 4)
	// a reads two hot shards, y two cold ones: even by count, not by load.
	for i, m := range []string{"a", "a", "y", "y"} {
		require.True(t, co[m].take(t.Context(), shards[i]))
	}
	st.Mu.Lock()
	for i, bps := range []int64{1000, 1000, 100, 100} {
		st.Progress[shards[i]] = consumer.Progress{BytesPerSecond: bps}
	}
	st.Mu.Unlock()
	for _, m := range []string{"a", "y"} {
		clear(co[m].moved) // the takes' cool-downs are over
	}
	co["y"].rebalance(t.Context())
	require.Len(t, st.Handoff, 1, "y asks a for a hot shard by load")
	var asked string
	for id := range st.Handoff {
		asked = id
	}
	// a saw a shard move a moment ago: it holds the request back.
	co["a"].moved["elsewhere"] = time.Now()
	co["a"].rebalance(t.Context())
	require.False(t, co["a"].readers[asked].Stopping(), "a holds the request back while it cools down")
	// y's wait for the shard runs out before a's cool-down (six periods)
	// does; the request was made when y began waiting.
	past := time.Now().Add(-co["y"].askWait() - time.Millisecond)
	co["y"].asked[asked] = past
	st.Mu.Lock()
	st.HandoffAt[asked] = past
	st.Mu.Unlock()
	co["y"].rebalance(t.Context())
	// a's cool-down ends: a request left in the store would be honoured.
	clear(co["a"].moved)
	co["a"].rebalance(t.Context())
	if r := co["a"].readers[asked]; r == nil || r.Stopping() {
		require.Eventually(t, func() bool {
			ls, _ := st.Leases(t.Context())
			l, ok := ls[asked]
			return !ok || l.Expired || l.Owner == ""
		}, 5*time.Second, 10*time.Millisecond, "a releases the shard")
		co["y"].rebalance(t.Context())
		assert.NotNil(t, co["y"].readers[asked], "a handed %s over after y stopped waiting for it, and nobody took it", asked)
		return
	}
	st.Mu.Lock()
	_, kept := st.Handoff[asked]
	st.Mu.Unlock()
	assert.False(t, kept, "the request y stopped waiting for lapsed")

	// y's own cool-down from its ask ends; the loads are as uneven as
	// before, so y asks again, and a, cooled down, honours the new request.
	clear(co["y"].moved)
	co["y"].rebalance(t.Context())
	st.Mu.Lock()
	var again string
	for id, req := range st.Handoff {
		if req == "y" {
			again = id
		}
	}
	st.Mu.Unlock()
	require.NotEmpty(t, again, "y asks again")
	co["a"].rebalance(t.Context())
	require.True(t, co["a"].readers[again].Stopping(), "a honours the new request")
	require.Eventually(t, func() bool {
		ls, _ := st.Leases(t.Context())
		l, ok := ls[again]
		return !ok || l.Expired || l.Owner == ""
	}, 5*time.Second, 10*time.Millisecond, "a releases the shard")
	co["y"].rebalance(t.Context())
	assert.NotNil(t, co["y"].readers[again], "y takes the shard it asked for again")
}

// byLoadPair is two members, a and y, balancing by load over n shards of
// st, each a coordinator that runs balancing rounds when the test says.
func byLoadPair(t *testing.T, st consumer.Store, n int) ([]string, map[string]*coordinator) {
	t.Helper()
	var shards []string
	for i := range n {
		shards = append(shards, fmt.Sprintf("shardId-%012d", i))
	}
	for _, m := range []string{"a", "y"} {
		require.NoError(t, st.Heartbeat(t.Context(), m))
	}
	co := map[string]*coordinator{}
	for _, m := range []string{"a", "y"} {
		c := balancingCoordinator(st, m, shards)
		c.c.cfg.Balance = consumer.BalanceLoad
		for _, id := range shards {
			c.c.api.(*consumertest.Kinesis).Add(id, &consumertest.KinesisShard{Records: 1000})
		}
		ctx, cancel := context.WithCancel(t.Context())
		c.runCtx = ctx
		t.Cleanup(func() { cancel(); close(c.runDone) })
		co[m] = c
	}
	return shards, co
}
