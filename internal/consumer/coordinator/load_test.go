package coordinator

import (
	"context"
	"fmt"
	"maps"
	"math/rand/v2"
	"slices"
	"testing"
	"time"

	"github.com/connect-kinesis/connect-kinesis/internal/consumer"
	"github.com/connect-kinesis/connect-kinesis/internal/consumer/consumertest"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

const (
	hotRate  = 10_000 // bytes/s of a hot shard
	coldRate = 1_000  // bytes/s of the others
)

// hotStream is 8 shards, the first two hot (10× the others' bytes/s).
func hotStream() (shards []string, rates map[string]int64) {
	rates = map[string]int64{}
	for i := range 8 {
		id := fmt.Sprintf("shardId-%012d", i)
		shards = append(shards, id)
		rates[id] = coldRate
		if i < 2 {
			rates[id] = hotRate
		}
	}
	return shards, rates
}

// simulation plays balancing rounds of several members on a model of the
// group: each round every member plans against what the store shows, and
// the hand-offs it asks for complete before the next round (a hand-off
// takes less than a rebalance period). Measured rates wobble by ±15% each
// round, deterministically.
type simulation struct {
	members []string
	owners  map[string]string // shard -> member
	rates   map[string]int64  // nominal bytes/s
	moves   map[string]int    // shard -> times it changed hands
	moved   map[string]int    // shard -> round of its last move
	rnd     *rand.Rand
}

func newSimulation(members []string, owners map[string]string, rates map[string]int64) *simulation {
	return &simulation{members: members, owners: owners, rates: rates, moves: map[string]int{}, moved: map[string]int{},
		rnd: rand.New(rand.NewPCG(1, 2))}
}

// round plays one balancing round; plan returns the shards a member asks
// for.
func (s *simulation) round(n int, plan func(v loadView, self string, cooling func(string) bool) []string) {
	measured := map[string]int64{}
	for id, r := range s.rates {
		measured[id] = r * int64(85+s.rnd.IntN(31)) / 100
	}
	asked := map[string]string{}
	for _, m := range s.members {
		v := loadView{members: s.members, owners: maps.Clone(s.owners), rates: measured}
		// What this member asked for earlier in the round is its own
		// already (as the coordinator counts pending requests).
		for id, by := range asked {
			if by == m {
				v.owners[id] = m
			}
		}
		cooling := func(id string) bool {
			at, ok := s.moved[id]
			return ok && n-at < loadCoolDownRounds
		}
		for _, id := range plan(v, m, cooling) {
			asked[id] = m
		}
	}
	for _, id := range slices.Sorted(maps.Keys(asked)) {
		if s.owners[id] != asked[id] {
			s.owners[id] = asked[id]
			s.moves[id]++
			s.moved[id] = n
		}
	}
}

func (s *simulation) load(m string) (bytes int64, hot int) {
	for id, o := range s.owners {
		if o == m {
			bytes += s.rates[id]
			if s.rates[id] == hotRate {
				hot++
			}
		}
	}
	return bytes, hot
}

// countPlan is balancing by count as a plan: a member below its share asks
// a member holding at least two more shards than it for the difference
// (askForHandOff).
func countPlan(v loadView, self string, _ func(string) bool) []string {
	held := map[string][]string{}
	for _, id := range slices.Sorted(maps.Keys(v.owners)) {
		held[v.owners[id]] = append(held[v.owners[id]], id)
	}
	share := (len(v.owners) + len(v.members) - 1) / len(v.members)
	var asked []string
	for _, m := range v.members {
		if m != self && len(held[m])-len(held[self]) >= 2 {
			asked = append(asked, held[m][:min(share-len(held[self]), len(held[m])-share)]...)
		}
	}
	return asked
}

// Two instances share 8 shards 4 and 4 (as balancing by count leaves them)
// with both hot shards on one. Balancing by load must give each one hot
// shard, even out bytes/s within 1.5×, and move no shard more than once in
// two minutes of rounds (24 rounds of a 5 s rebalance_period). Balancing by
// count (the only balancing before load) leaves both hot shards where they
// are: run against countPlan, the load assertions fail.
func TestBalancingByLoadSpreadsHotShardsWithoutBouncing(t *testing.T) {
	play := func(plan func(v loadView, self string, cooling func(string) bool) []string) *simulation {
		shards, rates := hotStream()
		owners := map[string]string{}
		for i, id := range shards {
			owners[id] = []string{"a", "b"}[i/4]
		}
		sim := newSimulation([]string{"a", "b"}, owners, rates)
		for n := range 24 {
			sim.round(n, plan)
		}
		return sim
	}
	t.Run("load", func(t *testing.T) {
		sim := play(planLoadHandOffs)
		la, hotA := sim.load("a")
		lb, hotB := sim.load("b")
		t.Logf("a reads %d B/s (%d hot), b %d B/s (%d hot), moves %v", la, hotA, lb, hotB, sim.moves)
		assert.Equal(t, 1, hotA, "hot shards on a")
		assert.Equal(t, 1, hotB, "hot shards on b")
		assert.LessOrEqual(t, float64(max(la, lb))/float64(min(la, lb)), 1.5, "bytes/s per instance within 1.5×")
		for id, n := range sim.moves {
			assert.LessOrEqual(t, n, 1, "shard %s moved more than once", id)
		}
	})
	t.Run("count", func(t *testing.T) {
		sim := play(countPlan)
		_, hotA := sim.load("a")
		assert.Equal(t, 2, hotA, "counts are even, so nothing moves")
		assert.Empty(t, sim.moves)
	})
}

// A member that joins a group whose shards are all taken gets to its fair
// load by load too, in one round of asking, not one shard per round.
func TestBalancingByLoadLetsAJoinerCatchUpInOneRound(t *testing.T) {
	owners, rates := map[string]string{}, map[string]int64{}
	for i := range 12 {
		id := fmt.Sprintf("shardId-%012d", i)
		owners[id], rates[id] = []string{"a", "b"}[i%2], coldRate
	}
	sim := newSimulation([]string{"a", "b", "new"}, owners, rates)
	sim.round(0, planLoadHandOffs)
	got := map[string]int{}
	for _, o := range sim.owners {
		got[o]++
	}
	// Measured rates wobble, so the split is even within the band, not
	// exactly 4/4/4.
	assert.GreaterOrEqual(t, got["new"], 3, "shards per member after one round: %v", got)
}

func TestPlanLoadHandOffsKeepsNearlyEvenMembersStill(t *testing.T) {
	v := loadView{
		members: []string{"a", "b"},
		owners:  map[string]string{"h0": "a", "c1": "a", "h2": "b", "c3": "b", "c4": "b"},
		rates:   map[string]int64{"h0": 10, "c1": 1, "h2": 10, "c3": 1, "c4": 1},
	}
	never := func(string) bool { return false }
	assert.Empty(t, planLoadHandOffs(v, "a", never), "11 against 12 B/s is within the band")
	assert.Empty(t, planLoadHandOffs(v, "b", never), "the busier member never asks")
	v.owners["h2"] = "a"
	assert.Equal(t, []string{"h0"}, planLoadHandOffs(v, "b", never), "21 against 2: a hot shard best closes the gap (ties by id)")
	assert.Equal(t, []string{"c1"}, planLoadHandOffs(v, "b", func(id string) bool { return id == "h2" || id == "h0" }), "cooling shards stay; a cold one still narrows the gap")
}

// The coordinator asks for a hot shard by load, reading the loads the
// owners published; with lease.balance: count, or when an owner publishes
// no load (an older release), it balances by count and asks for nothing
// between two members with 4 shards each.
func TestRebalanceAsksForAHotShardByLoad(t *testing.T) {
	for _, tc := range []struct {
		name    string
		balance consumer.BalanceMode
		oldLoad bool
		want    []string
	}{
		{name: "load", balance: consumer.BalanceLoad, want: []string{"shardId-000000000000"}},
		{name: "default is load", balance: "", want: []string{"shardId-000000000000"}},
		{name: "count", balance: consumer.BalanceCount},
		{name: "an owner publishes no load", balance: consumer.BalanceLoad, oldLoad: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			st := consumertest.NewStore(time.Minute)
			st.OldLoads = map[string]consumer.ShardLoad{}
			shards, rates := hotStream()
			for i, id := range shards {
				owner := []string{"a", "b"}[i/4]
				_, err := st.Acquire(t.Context(), id, owner)
				require.NoError(t, err)
				require.NoError(t, st.PublishProgress(t.Context(), owner, map[string]consumer.Progress{id: {BytesPerSecond: rates[id]}}))
			}
			if tc.oldLoad {
				st.OldLoads[shards[5]] = consumer.ShardLoad{}
			}
			for _, m := range []string{"a", "b"} {
				require.NoError(t, st.Heartbeat(t.Context(), m))
			}
			co := balancingCoordinator(st, "b", shards)
			co.c.cfg.Balance = tc.balance
			for _, id := range shards[4:] {
				co.readers[id] = newFakeReader(id, consumer.Lease{Shard: id}) // b reads its four shards
			}

			co.rebalance(t.Context())

			var asked []string
			for shard, requester := range st.Handoff {
				assert.Equal(t, "b", requester)
				asked = append(asked, shard)
			}
			slices.Sort(asked)
			assert.Equal(t, tc.want, asked)
		})
	}
}

// Guards the defect that made TestThreeConsumersSettleOnFairShares flaky:
// a member that took a free shard asked for another by load before the
// shard's rate under it was measured (its first publish covers part of a
// window), so a group already settled by count traded a shard again.
func TestAMemberDoesNotAskByLoadWhileAShardItTookCoolsDown(t *testing.T) {
	st := consumertest.NewStore(time.Minute)
	var shards []string
	for i := range 4 {
		shards = append(shards, fmt.Sprintf("shardId-%012d", i))
	}
	for i, owner := range []string{"b", "a", "a"} {
		_, err := st.Acquire(t.Context(), shards[i], owner)
		require.NoError(t, err)
	}
	for _, m := range []string{"a", "b", "c"} {
		require.NoError(t, st.Heartbeat(t.Context(), m))
	}
	setRate := func(shard string, bps int64) {
		st.Mu.Lock()
		defer st.Mu.Unlock()
		st.Progress[shard] = consumer.Progress{BytesPerSecond: bps}
	}
	for _, id := range shards[:3] {
		setRate(id, 1000)
	}
	co := balancingCoordinator(st, "c", shards)
	for _, id := range shards {
		co.c.api.(*consumertest.Kinesis).Add(id, &consumertest.KinesisShard{Records: 1000})
	}
	ctx, cancel := context.WithCancel(t.Context())
	co.runCtx = ctx
	t.Cleanup(func() { cancel(); close(co.runDone) })

	co.rebalance(t.Context())
	require.Contains(t, co.readers, shards[3], "c takes the free shard, its quota")
	// c's first publish of the shard covers a fraction of a window.
	setRate(shards[3], 100)
	co.rebalance(t.Context())

	assert.Empty(t, st.Handoff, "c asked for a hand-off by load while the rate of the shard it just took was not yet measured (2, 1, 1 is settled by count)")
}

// Guards the cause of TestThreeConsumersSettleOnFairShares's flake by
// load: a holder that had just seen a shard move honoured a request (one
// left from a shortfall by count) judged on the new owner's partial first
// rate, and a group settled by count traded a shard again.
func TestAHolderCoolingDownFromAMoveHandsNothingOverByLoad(t *testing.T) {
	st := consumertest.NewStore(time.Minute)
	var shards []string
	for i := range 4 {
		shards = append(shards, fmt.Sprintf("shardId-%012d", i))
	}
	for _, m := range []string{"a", "b", "c"} {
		require.NoError(t, st.Heartbeat(t.Context(), m))
	}
	_, err := st.Acquire(t.Context(), shards[2], "b")
	require.NoError(t, err)
	co := balancingCoordinator(st, "a", shards)
	for _, id := range shards {
		co.c.api.(*consumertest.Kinesis).Add(id, &consumertest.KinesisShard{Records: 1000})
	}
	ctx, cancel := context.WithCancel(t.Context())
	co.runCtx = ctx
	t.Cleanup(func() { cancel(); close(co.runDone) })
	co.rebalance(t.Context()) // a takes its quota: shards 0 and 1
	require.Len(t, co.readers, 2)
	// a saw shard 3 move to c a moment ago; c's first rate covers part of
	// a window, and c's request for shard 0 is still in the store.
	co.lastOwner[shards[3]] = "a"
	_, err = st.Acquire(t.Context(), shards[3], "c")
	require.NoError(t, err)
	st.Mu.Lock()
	for id, bps := range map[string]int64{shards[0]: 1000, shards[1]: 1000, shards[2]: 1000, shards[3]: 50} {
		st.Progress[id] = consumer.Progress{BytesPerSecond: bps}
	}
	st.Mu.Unlock()
	require.NoError(t, st.RequestHandoff(t.Context(), shards[0], "c"))

	co.rebalance(t.Context())

	for id, r := range co.readers {
		assert.False(t, r.Stopping(), "a handed %s over by load while cooling down from a move", id)
	}
}
