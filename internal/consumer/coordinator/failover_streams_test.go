package coordinator

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/connect-kinesis/connect-kinesis/internal/consumer"
	"github.com/connect-kinesis/connect-kinesis/internal/consumer/consumertest"
)

// Guards the take quota across streams after a failover: the shared
// rounds hand every stream's round to its run loop at once, so a
// survivor's rounds of three streams each read the tally before any wrote
// it back (and its entries still carry the dead member), each balanced its
// stream alone and took that stream's orphan up to the per-stream quota,
// whose extra shard goes to the first member by id in every stream: the
// survivor ended two above the others, who asked it for shards, so shards
// of a live instance moved. The rounds run here as the shared rounds run
// them, at once, with takes slow enough that each round reads the tally
// before another writes it back.
func TestFailoverAcrossStreamsConcurrentRoundsKeepTheQuota(t *testing.T) {
	streams := []string{"s1", "s2", "s3"}
	members := []string{"a", "b", "c", "d"}
	stores := map[string]*consumertest.Store{}
	api := consumertest.NewKinesis()
	var shards []string
	for i := range 4 {
		id := fmt.Sprintf("shardId-%012d", i)
		shards = append(shards, id)
		api.Add(id, &consumertest.KinesisShard{Records: 1000000})
	}
	for _, s := range streams {
		stores[s] = consumertest.NewStore(time.Minute)
		stores[s].HandoffMaxAge = consumer.HandoffRequestMaxAge(time.Minute) // the rounds' period
		for _, m := range members {
			require.NoError(t, stores[s].Heartbeat(t.Context(), m))
		}
		// Each member reads one shard of each stream.
		for i, m := range members {
			_, err := stores[s].Acquire(t.Context(), shards[i], m)
			require.NoError(t, err)
		}
	}
	cos := map[string]map[string]*coordinator{}
	for _, m := range members {
		cfg := testConfig()
		cfg.Balance = consumer.BalanceCount
		cfg.RebalancePeriod = time.Minute // only the quotas decide the takes
		c := &Consumer{cfg: cfg, api: api, owner: m, metrics: consumer.NewMetrics(nil)}
		cos[m] = map[string]*coordinator{}
		for _, s := range streams {
			co := blankCoordinator(c, s)
			co.id, co.streamName, co.store = s, s, slowTakes{stores[s]}
			for _, id := range shards {
				co.listed[id] = consumer.Shard{ID: id}
			}
			ctx, cancel := context.WithCancel(t.Context())
			co.runCtx = ctx
			t.Cleanup(func() { cancel(); close(co.runDone) })
			cos[m][s] = co
		}
	}
	held := func(m string) int {
		n := 0
		for _, s := range streams {
			n += len(cos[m][s].readers)
		}
		return n
	}
	// Each member's reader of its shard (its lease let go and taken again,
	// as after its first take), then a round of every stream.
	for _, s := range streams {
		stores[s].Mu.Lock()
		clear(stores[s].LeaseMap)
		stores[s].Mu.Unlock()
	}
	for i, m := range members {
		for _, s := range streams {
			require.True(t, cos[m][s].take(t.Context(), shards[i]))
		}
	}
	for _, m := range members {
		for _, s := range streams {
			cos[m][s].rebalance(t.Context())
		}
		require.Equal(t, 3, held(m), "%s reads one shard of each stream", m)
	}
	before := map[string]string{}
	for _, s := range streams {
		for id, l := range stores[s].LeaseMap {
			before[s+"/"+id] = l.Owner
		}
	}

	// d dies: its heartbeat and its leases run out.
	for _, s := range streams {
		st := stores[s]
		st.Mu.Lock()
		delete(st.Members, "d")
		for id, l := range st.LeaseMap {
			if l.Owner == "d" {
				l.ExpiresAt = time.Now().Add(-time.Second)
				st.LeaseMap[id] = l
			}
		}
		st.Mu.Unlock()
	}

	// Each survivor's rounds of the three streams run at once, as the
	// shared rounds hand them out.
	concurrently := func(m string) {
		var wg sync.WaitGroup
		for _, s := range streams {
			wg.Go(func() { cos[m][s].rebalance(t.Context()) })
		}
		wg.Wait()
	}
	for range 3 {
		for _, m := range []string{"a", "b", "c"} {
			concurrently(m)
			for _, s := range streams {
				for shard, requester := range stores[s].Handoff {
					assert.Failf(t, "a survivor asked another for a shard", "%s asked for %s/%s, held by %s (held: a %d, b %d, c %d)",
						requester, s, shard, stores[s].LeaseMap[shard].Owner, held("a"), held("b"), held("c"))
				}
			}
		}
	}
	assert.Equal(t, []int{4, 4, 4}, []int{held("a"), held("b"), held("c")}, "the orphans alone balance the survivors")
	for _, s := range streams {
		for _, id := range shards {
			if was := before[s+"/"+id]; was != "d" {
				assert.Equal(t, was, stores[s].LeaseMap[id].Owner, "shard %s/%s of a survivor moved", s, id)
			}
		}
	}
}

// slowTakes is a store whose takes take a while, as Redis round trips
// under load do.
type slowTakes struct{ *consumertest.Store }

func (s slowTakes) Acquire(ctx context.Context, shard, owner string) (consumer.Take, error) {
	time.Sleep(20 * time.Millisecond)
	return s.Store.Acquire(ctx, shard, owner)
}
