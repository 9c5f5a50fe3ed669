package consumer

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// A re-seed leaves out readers that have finished but that the run loop
// has not forgotten yet: one that closed its shard seeds the shard as
// closed (SHARD_END, the closed set), not its acked position and lease; one
// that handed its lease back seeds no lease. A store that came back empty
// in that moment then keeps the close and restores no finished lease.
func TestReseedLeavesOutFinishedReaders(t *testing.T) {
	st := newFakeStore(time.Minute)
	co := &coordinator{c: &Consumer{owner: "a", metrics: newMetrics(nil)}, store: st, readers: map[string]*shardReader{}}
	reader := func(id string, finished, closedShard bool) *shardReader {
		r := &shardReader{co: co, shard: Shard{ID: id}, tracker: newTracker(), done: make(chan struct{}), renewed: make(chan struct{})}
		r.lease.Store(&Lease{Shard: id, Owner: "a", Token: 3, Deadline: time.Now().Add(time.Hour)})
		r.tracker.ack(r.tracker.add(Position{Sequence: "77"}))
		r.closedShard = closedShard
		if finished {
			close(r.done)
		}
		co.readers[id] = r
		return r
	}
	reader("closed", true, true)
	reader("handed-back", true, false)
	reader("reading", false, false)

	co.reseed(t.Context())
	st.mu.Lock()
	defer st.mu.Unlock()
	assert.True(t, st.closed["closed"], "a shard its reader closed is seeded closed")
	assert.Equal(t, Position{ShardEnd: true}, st.ckpt["closed"], "not at its acked position")
	require.Contains(t, st.leases, "reading")
	assert.NotContains(t, st.leases, "closed", "no lease of a closed shard")
	assert.NotContains(t, st.leases, "handed-back", "no lease handed back")
	assert.Equal(t, Position{Sequence: "77"}, st.ckpt["reading"])
}
