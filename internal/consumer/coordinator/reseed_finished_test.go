package coordinator

import (
	"testing"
	"time"

	"github.com/connect-kinesis/connect-kinesis/internal/consumer"
	"github.com/connect-kinesis/connect-kinesis/internal/consumer/consumertest"
	"github.com/connect-kinesis/connect-kinesis/internal/consumer/reader"
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
	co := &coordinator{c: &Consumer{owner: "a", metrics: consumer.NewMetrics(nil)}, store: st, readers: map[string]*reader.Reader{}}
	reader := func(id string, finished, closedShard bool) *reader.Reader {
		r := &shardReader{co: co, shard: consumer.Shard{ID: id}, tracker: newTracker(), done: make(chan struct{}), renewed: make(chan struct{})}
		r.lease.Store(&consumer.Lease{Shard: id, Owner: "a", Token: 3, Deadline: time.Now().Add(time.Hour)})
		r.tracker.ack(r.tracker.add(consumer.Position{Sequence: "77"}))
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
	st.Mu.Lock()
	defer st.Mu.Unlock()
	assert.True(t, st.Closed["closed"], "a shard its reader closed is seeded closed")
	assert.Equal(t, consumer.Position{ShardEnd: true}, st.Ckpt["closed"], "not at its acked position")
	require.Contains(t, st.Leases, "reading")
	assert.NotContains(t, st.Leases, "closed", "no lease of a closed shard")
	assert.NotContains(t, st.Leases, "handed-back", "no lease handed back")
	assert.Equal(t, consumer.Position{Sequence: "77"}, st.Ckpt["reading"])
}
