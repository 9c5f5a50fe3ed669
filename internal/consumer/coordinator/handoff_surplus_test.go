package coordinator

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/connect-kinesis/connect-kinesis/internal/consumer"
	"github.com/connect-kinesis/connect-kinesis/internal/consumer/consumertest"
)

// loadsFailStore is a store whose shard loads cannot be read while fail is
// set, as a Cluster's round read on its own may find them.
type loadsFailStore struct {
	*consumertest.Store
	fail bool
}

func (s *loadsFailStore) ShardLoads(ctx context.Context) (map[string]consumer.ShardLoad, error) {
	if s.fail {
		return nil, errors.New("loads unreadable")
	}
	return s.Store.ShardLoads(ctx)
}

// Guards the surplus hand-off in a group balanced by load: a holder whose
// round could not read the loads balances that round by count, and handed
// over its whole surplus by count, shards nobody asked for, although the
// group's counts are uneven by design and every other member balances by
// load; the members below their quota by count took them, and the rounds
// by load moved them back.
func TestByLoadARoundWithoutTheLoadsHandsOverOnlyTheShardsAsked(t *testing.T) {
	st, co, shards := surplusByLoadGroup(t, 100, 400)
	// y asked a for one shard (a request left in the store), and a's round
	// cannot read the loads: it balances by count.
	require.NoError(t, st.RequestHandoff(t.Context(), shards[0], "y"))
	st.fail = true
	co["a"].rebalance(t.Context())

	assert.Equal(t, []string{shards[0]}, stoppedReaders(co["a"], shards), "a hands over only the shard y asked for, not its surplus by count")
}

// Guards the limit of the fix above: a group balanced by load that reads
// nothing balances by count in every member's round, and a holder asked
// for a shard hands over its whole surplus by count as under
// lease.balance count.
func TestByLoadAnIdleGroupHandsOverTheSurplusByCount(t *testing.T) {
	st, co, shards := surplusByLoadGroup(t, 0, 0)
	require.NoError(t, st.RequestHandoff(t.Context(), shards[0], "y"))
	co["a"].rebalance(t.Context())

	// a's quota is 5 of 10: the shard asked for and two from the end.
	assert.Equal(t, []string{shards[0], shards[6], shards[7]}, stoppedReaders(co["a"], shards), "a hands over its surplus by count")
}

// surplusByLoadGroup starts a group balanced by load of two members: a
// reads eight shards of cold bytes/s each, y two of hot each (even by
// load when hot is four times cold).
func surplusByLoadGroup(t *testing.T, cold, hot int64) (*loadsFailStore, map[string]*coordinator, []string) {
	t.Helper()
	st := &loadsFailStore{Store: consumertest.NewStore(time.Minute)}
	shards, co := byLoadPair(t, st, 10)
	st.Mu.Lock()
	for i := range shards {
		bps := cold
		if i >= 8 {
			bps = hot
		}
		st.Progress[shards[i]] = consumer.Progress{BytesPerSecond: bps}
	}
	st.Mu.Unlock()
	for i, id := range shards {
		m := "a"
		if i >= 8 {
			m = "y"
		}
		require.True(t, co[m].take(t.Context(), id))
	}
	clear(co["a"].moved)
	return st, co, shards
}

// stoppedReaders lists, in id order, the shards whose readers co stops.
func stoppedReaders(co *coordinator, shards []string) []string {
	var stopped []string
	for _, id := range shards {
		if r := co.readers[id]; r != nil && r.Stopping() {
			stopped = append(stopped, id)
		}
	}
	return stopped
}
