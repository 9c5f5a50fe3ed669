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
