package coordinator

import (
	"context"
	"slices"
	"testing"
	"time"

	"github.com/connect-kinesis/connect-kinesis/internal/consumer"
	"github.com/connect-kinesis/connect-kinesis/internal/consumer/consumertest"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// parentRig is a coordinator over st that lists a closed parent and its two
// children, which another member holds, and that learned the parent closed
// in a first balancing round.
func parentRig(t *testing.T, st *consumertest.Store) *coordinator {
	t.Helper()
	co := balancingCoordinator(st, "me", nil)
	co.listed = map[string]consumer.Shard{
		"p":  {ID: "p", Closed: true},
		"c1": {ID: "c1", Parent: "p"},
		"c2": {ID: "c2", Parent: "p"},
	}
	ctx, cancel := context.WithCancel(t.Context())
	co.runCtx, co.runDone = ctx, make(chan struct{})
	t.Cleanup(func() { cancel(); close(co.runDone) })
	for _, id := range []string{"c1", "c2"} {
		_, err := st.Acquire(t.Context(), id, "other")
		require.NoError(t, err)
	}
	require.NoError(t, st.Heartbeat(t.Context(), "other"))
	st.Mu.Lock()
	// Closed by another instance under token 3: released at time 0.
	st.Closed["p"], st.Ckpt["p"] = true, consumer.Position{ShardEnd: true}
	st.LeaseMap["p"] = consumer.Lease{Shard: "p", Token: 3, ExpiresAt: time.UnixMilli(0)}
	st.Mu.Unlock()
	co.rebalance(ctx)
	_, known := co.known.closedSet["p"]
	require.True(t, known, "the first round learned the parent closed")
	return co
}

// forget empties the store as Redis restarting empty does, and lets
// another instance that never knew the parent closed re-seed it first: it
// restores the leases it holds, and no other.
func forget(st *consumertest.Store) {
	st.Mu.Lock()
	defer st.Mu.Unlock()
	st.Closed, st.Ckpt = map[string]bool{}, map[string]consumer.Position{}
	for id, l := range st.LeaseMap {
		if l.Owner == "" {
			delete(st.LeaseMap, id)
		}
	}
}

// A store that forgot the group and was re-seeded by an instance that never
// knew a parent closed must not make this instance drop the parent's close:
// the gate keeps the parent closed, the round writes the close back, and a
// later re-seed from this instance carries it again.
func TestAClosedParentKeepsItsMarkWhenAnotherInstanceReseedsWithoutIt(t *testing.T) {
	t.Parallel()
	st := consumertest.NewStore(time.Minute)
	co := parentRig(t, st)
	forget(st)

	co.rebalance(co.runCtx)
	st.Mu.Lock()
	l, taken := st.LeaseMap["p"]
	closed := st.Closed["p"]
	st.Mu.Unlock()
	assert.False(t, taken && l.Owner == "me", "the closed parent was taken again after its children")
	assert.True(t, closed, "the parent's close was not written back to the store")
	_, known := co.known.closedSet["p"]
	assert.True(t, known, "the parent's close was dropped from what this instance knows")

	forget(st)
	co.reseed(co.runCtx)
	st.Mu.Lock()
	defer st.Mu.Unlock()
	assert.True(t, st.Closed["p"], "a later re-seed from this instance lacks the parent's close")
}

// After a wipe and a re-seed without the parent's close, another instance
// takes the parent under a fresh token (the store's tokens start again):
// that is no reset, and the close is still written back.
func TestAClosedParentTakenAfterAWipeIsNoReset(t *testing.T) {
	t.Parallel()
	st := consumertest.NewStore(time.Minute)
	co := parentRig(t, st)
	forget(st)
	st.Mu.Lock()
	st.LeaseMap["p"] = consumer.Lease{Shard: "p", Owner: "other", Token: 1, ExpiresAt: time.Now().Add(time.Minute)}
	st.Mu.Unlock()

	co.rebalance(co.runCtx)
	st.Mu.Lock()
	defer st.Mu.Unlock()
	assert.True(t, st.Closed["p"], "the parent's close was not written back")
}

// An operator's reset or import (or a recreated stream) frees every lease
// at time 0 with its token raised and may leave a closed shard out of the
// new closed set: that close is the operator's to drop, so this instance
// forgets it rather than write it back, also when another instance took
// the shard (under a higher token still) before this instance's round.
func TestAnOperatorsResetDropsAKnownClose(t *testing.T) {
	t.Parallel()
	for name, lease := range map[string]consumer.Lease{
		"freed":       {Shard: "p", Token: 4, ExpiresAt: time.UnixMilli(0)},
		"taken since": {Shard: "p", Owner: "other", Token: 5, ExpiresAt: time.Now().Add(time.Minute)},
	} {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			st := consumertest.NewStore(time.Minute)
			co := parentRig(t, st)
			st.Mu.Lock()
			st.Closed = map[string]bool{}
			delete(st.Ckpt, "p")
			st.LeaseMap["p"] = lease
			st.Mu.Unlock()

			co.rebalance(co.runCtx)
			// The round may take the freed parent and its reader close it
			// again at its end: that close is a new one. What must not
			// happen is the round writing the dropped close back.
			st.Mu.Lock()
			wroteBack := slices.Contains(st.ReseededClosed, "p")
			st.Mu.Unlock()
			assert.False(t, wroteBack, "the operator's reset was undone: the round wrote the dropped close back")
			co.known.mu.Lock()
			defer co.known.mu.Unlock()
			_, known := co.known.closedSet["p"]
			assert.False(t, known, "the close the operator dropped is still known")
		})
	}
}
