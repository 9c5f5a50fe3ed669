package coordinator

import (
	"testing"
	"time"

	"github.com/connect-kinesis/connect-kinesis/internal/consumer"
	"github.com/connect-kinesis/connect-kinesis/internal/consumer/consumertest"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// A re-seed leaves out readers that have finished but that the run loop
// has not forgotten yet: one that closed its shard seeds the shard as
// closed (SHARD_END, the closed set), not its acked position and lease; one
// that handed its lease back seeds no lease. A store that came back empty
// in that moment then keeps the close and restores no finished lease.
func TestReseedLeavesOutFinishedReaders(t *testing.T) {
	st := consumertest.NewStore(time.Minute)
	co := &coordinator{c: &Consumer{owner: "a", metrics: consumer.NewMetrics(nil)}, store: st, readers: map[string]shardReader{}}
	newReader := func(id string, finished, closedShard bool) {
		r := newFakeReader(id, consumer.Lease{Shard: id, Owner: "a", Token: 3, Deadline: time.Now().Add(time.Hour)})
		r.acked, r.hasAcked = consumer.Position{Sequence: "77"}, true
		r.outcome.ClosedShard = closedShard
		if finished {
			close(r.done)
		}
		co.readers[id] = r
	}
	newReader("closed", true, true)
	newReader("handed-back", true, false)
	newReader("reading", false, false)

	co.reseed(t.Context())
	st.Mu.Lock()
	defer st.Mu.Unlock()
	assert.True(t, st.Closed["closed"], "a shard its reader closed is seeded closed")
	assert.Equal(t, consumer.Position{ShardEnd: true}, st.Ckpt["closed"], "not at its acked position")
	require.Contains(t, st.LeaseMap, "reading")
	assert.NotContains(t, st.LeaseMap, "closed", "no lease of a closed shard")
	assert.NotContains(t, st.LeaseMap, "handed-back", "no lease handed back")
	assert.Equal(t, consumer.Position{Sequence: "77"}, st.Ckpt["reading"])
}

// A shard this instance handed back keeps no position here: another owner
// takes it from the store's checkpoint, and a holder that wins it back
// after a wipe (the tie rule, or a provisional shard claimed by a holder of
// the kept record) may do so under a token no higher than this instance's,
// which no balancing round tells from this instance's own (superseded).
// Re-seeded after a later wipe, the handed-back position was kept as the
// later one over the holder's and passed records no one had delivered.
// Both moments are covered: the run loop has forgotten the finished reader
// (and a balancing round ran since), or a re-seed finds it finished but
// not yet forgotten.
//
// Guards: a handed-back shard's position stayed known and was re-seeded
// over the holder that took the shard back (the store's checkpoint 13 past
// the holder's 3).
func TestAHandedBackPositionIsNotReseededOverAHolderThatTookTheShardBack(t *testing.T) {
	t.Parallel()
	const shard = "s0"
	for _, when := range []string{"forgotten", "finished at the re-seed"} {
		t.Run(when, func(t *testing.T) {
			t.Parallel()
			st := consumertest.NewStore(time.Minute)
			co := balancingCoordinator(st, "me", []string{shard})
			co.runCtx = t.Context()
			take, err := st.Acquire(t.Context(), shard, "me")
			require.NoError(t, err)
			co.known.take(take)
			l := take.Lease
			l.Deadline = time.Now().Add(time.Minute)
			r := newFakeReader(shard, l)
			co.readers[shard] = r
			// The hand-back: the final commit of 13 landed and was heard
			// of, then the lease was released.
			require.NoError(t, st.Commit(t.Context(), take.Lease, consumer.Position{Sequence: "13"}))
			co.readerStream().Committed(shard, consumer.Position{Sequence: "13"}, take.Token)
			require.NoError(t, st.Release(t.Context(), take.Lease))
			r.outcome.Released = true
			close(r.done)

			claimedBack(st, shard, take.Token, consumer.Position{Sequence: "3"})
			if when == "forgotten" {
				co.forgetReader(r)
				co.rebalance(co.runCtx)
			}

			holderReseeds(st, shard, consumer.Position{Sequence: "3"})
			co.reseed(co.runCtx)
			st.Mu.Lock()
			defer st.Mu.Unlock()
			assert.Equal(t, consumer.Position{Sequence: "3"}, st.Ckpt[shard],
				"a later re-seed wrote the handed-back 13 over the holder's 3")
		})
	}
}
