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

// oneShardStreams is the group of the balancing tests: streams one-shard
// streams of records each, read through fakes; one instance takes them
// all, then b and c join. It returns the shards each member holds, and a
// check that every record is read once.
func oneShardStreams(t *testing.T, prefix string, streams, records int, edit func(*consumer.Config)) (held func() map[string]int, readOnce func()) {
	t.Helper()
	api := newStreamsAPI()
	var names []string
	var found []Found
	for i := range streams {
		name := fmt.Sprintf("%s-%02d", prefix, i)
		names = append(names, name)
		api.create(name, 1, records, time.Unix(1_700_000_000, 0))
		found = append(found, api.found(name, consumer.StartTrimHorizon))
	}
	stores := &storesByStream{}
	got := &streamLog{}
	ctx, cancel := context.WithCancel(t.Context())
	t.Cleanup(cancel)
	held = func() map[string]int {
		out := map[string]int{}
		for _, n := range names {
			st := stores.store(consumertest.FakeARNPrefix + n)
			st.Mu.Lock()
			for _, l := range st.LeaseMap {
				if st.Live(l, true) {
					out[l.Owner]++
				}
			}
			st.Mu.Unlock()
		}
		return out
	}
	startFollowerWith(ctx, t, api, stores, "a", got, found, edit)
	require.Eventually(t, func() bool { return held()["a"] == streams }, 10*time.Second, 20*time.Millisecond, "the first instance takes every stream")
	startFollowerWith(ctx, t, api, stores, "b", got, found, edit)
	startFollowerWith(ctx, t, api, stores, "c", got, found, edit)
	readOnce = func() {
		require.Eventually(t, func() bool {
			for _, n := range names {
				if c, _ := got.count(n); c < records {
					return false
				}
			}
			return true
		}, 20*time.Second, 20*time.Millisecond)
		for _, n := range names {
			c, dup := got.count(n)
			assert.Equal(t, records, c, "records of %s", n)
			assert.Zero(t, dup, "records of %s acked twice at a hand-off", n)
		}
	}
	return held, readOnce
}

// Many one-shard streams, one instance that took them all, two that join
// later: balancing stream by stream gives each stream a share of one
// shard, which the first instance already has, so the others would read
// nothing. Across streams, every instance ends with a third of them, and
// every record is read once. This is the default, balancing by load, and
// the shards' bytes/s here come from one burst of 40 records read at the
// start, so they differ up to twofold and change as the burst ages: after
// the even split the load rule may move shards again (1 run of 10 ended
// at 4/5/3), but every shard stays held and no member is left with none.
// By count the split stays even (TestStreamsStayEvenAcrossInstancesByCount).
func TestStreamsAreBalancedAcrossInstances(t *testing.T) {
	t.Parallel()
	const streams, records = 12, 40
	held, readOnce := oneShardStreams(t, "one", streams, records, nil)
	require.EventuallyWithT(t, func(c *assert.CollectT) {
		assert.Equal(c, map[string]int{"a": 4, "b": 4, "c": 4}, held(), "shards by instance")
	}, 20*time.Second, 50*time.Millisecond)
	time.Sleep(20 * testConfig().RebalancePeriod)
	require.EventuallyWithT(t, func(c *assert.CollectT) {
		h := held()
		total := 0
		for _, m := range []string{"a", "b", "c"} {
			assert.GreaterOrEqual(c, h[m], 1, "shards of %s after 20 more rounds: %v", m, h)
			total += h[m]
		}
		assert.Equal(c, streams, total, "every shard held: %v", h)
	}, 5*testConfig().RebalancePeriod, 20*time.Millisecond)
	readOnce()
}

// A round adds up only the streams the same members read: a stream another
// member does not read yet is balanced alone.
func TestTallyAddsUpStreamsOfTheSameMembers(t *testing.T) {
	var tl tally
	ab := []string{"a", "b"}
	tl.set("x", streamTally{members: memberKey(ab), ready: 3, held: map[string]int{"a": 3}})
	tl.set("y", streamTally{members: memberKey([]string{"a"}), ready: 5, held: map[string]int{"a": 5}})
	tl.set("z", streamTally{members: memberKey(ab), ready: 2, held: map[string]int{"b": 2}, loads: map[string]int64{"b": 7}, askedAt: time.Now(), asked: 1})
	e := tl.others("w", ab, time.Minute)
	assert.Equal(t, 5, e.ready, "x and z, not y")
	assert.Equal(t, map[string]int{"a": 3, "b": 2}, e.held)
	assert.Equal(t, map[string]int64{"b": 7}, e.loads)
	assert.Equal(t, 1, e.asked)
	assert.Equal(t, 2, tl.others("x", ab, time.Minute).ready, "a stream leaves itself out")
	assert.Zero(t, tl.others("w", ab, 0).asked, "asks older than the pending window no longer count")
	tl.drop("z")
	assert.Equal(t, 3, tl.others("w", ab, time.Minute).ready)
}

// By load, a member busy in the other streams asks for nothing in this
// one, and the idle member asks for the hot shard it would otherwise leave.
func TestPlanLoadHandOffsCountsTheOtherStreams(t *testing.T) {
	never := func(string) bool { return false }
	v := loadView{
		members: []string{"a", "b"},
		owners:  map[string]string{"h0": "a", "h1": "a"},
		rates:   map[string]int64{"h0": 10, "h1": 10},
	}
	assert.Equal(t, []string{"h0"}, planLoadHandOffs(v, "b", never), "alone, b asks for one of a's two hot shards")
	v.others = map[string]int64{"b": 20}
	assert.Empty(t, planLoadHandOffs(v, "b", never), "b reads 20 B/s elsewhere: even already")
	v.others = map[string]int64{"a": 30}
	asked := planLoadHandOffs(v, "b", never)
	assert.Len(t, asked, 2, "a reads 50 B/s in all, b none: both hot shards of this stream go to b")
	give := v.givingEvensOut("a")
	assert.True(t, give("h0", "b"), "a, busier in all, gives")
	v.others = map[string]int64{"b": 30}
	give = v.givingEvensOut("a")
	assert.False(t, give("h0", "b"), "b is busier in all: a keeps it")
}

// By count, the split stays even: after an even 4/4/4 over 12 one-shard
// streams, 20 more rounds move nothing. By load, the default, the same
// group may move shards again after the split, following rates that
// differ and change (TestStreamsAreBalancedAcrossInstances).
func TestStreamsStayEvenAcrossInstancesByCount(t *testing.T) {
	t.Parallel()
	const streams, records = 12, 40
	held, readOnce := oneShardStreams(t, "even", streams, records, func(c *consumer.Config) { c.Balance = consumer.BalanceCount })
	even := map[string]int{"a": 4, "b": 4, "c": 4}
	require.EventuallyWithT(t, func(c *assert.CollectT) { assert.Equal(c, even, held()) }, 20*time.Second, 50*time.Millisecond)
	for range 20 {
		time.Sleep(testConfig().RebalancePeriod)
		require.Equal(t, even, held(), "shards by instance in the 20 rounds after the even split")
	}
	readOnce()
}
