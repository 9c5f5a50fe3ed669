package coordinator

import (
	"testing"
	"time"

	"github.com/connect-kinesis/connect-kinesis/internal/consumer"
	"github.com/connect-kinesis/connect-kinesis/internal/consumer/consumertest"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// reseededTo is the checkpoint a re-seed from co writes for shard into a
// store that forgot everything.
func reseededTo(t *testing.T, co *coordinator, st *consumertest.Store, shard string) (consumer.Position, bool) {
	t.Helper()
	forget(st)
	co.reseed(co.runCtx)
	st.Mu.Lock()
	defer st.Mu.Unlock()
	p, ok := st.Ckpt[shard]
	return p, ok
}

// operatorReset does what `checkpoints reset` does to one shard: a new
// checkpoint, and the lease freed at time 0 with its token raised.
func operatorReset(st *consumertest.Store, shard string, to consumer.Position) {
	st.Mu.Lock()
	defer st.Mu.Unlock()
	st.Ckpt[shard] = to
	st.LeaseMap[shard] = consumer.Lease{Shard: shard, Token: st.LeaseMap[shard].Token + 1, ExpiresAt: time.UnixMilli(0)}
}

// A reader fenced by an operator's reset forgets the position it
// committed: a later re-seed must not write it over the operator's.
func TestAReaderFencedByAnOperatorIsNotReseededAheadOfTheReset(t *testing.T) {
	t.Parallel()
	const shard = "shardId-000000000000"
	st := consumertest.NewStore(time.Minute)
	co, r := pastDeadlineReader(t, st, shard)
	take, err := st.Acquire(t.Context(), shard, "me")
	require.NoError(t, err)
	r.LeaseRenewed(take.Lease)
	require.NoError(t, st.Commit(t.Context(), take.Lease, consumer.Position{Sequence: "500"}))
	co.known.committedTo(shard, consumer.Position{Sequence: "500"}, take.Token)

	operatorReset(st, shard, consumer.Position{Sequence: "100"})
	co.stopLost(co.runCtx, map[string]shardReader{shard: r}, []string{shard})

	p, ok := reseededTo(t, co, st, shard)
	assert.False(t, ok, "re-seeded %v ahead of the operator's reset to 100", p)
}

// A reader that handed its shard back keeps its position only until the
// store shows the lease taken under a newer token: an operator's reset
// (which raises every token) is seen at the next balancing round, and a
// later re-seed does not write the handed-back position over the reset.
func TestAHandedBackShardIsNotReseededAheadOfAnOperatorsReset(t *testing.T) {
	t.Parallel()
	const shard = "shardId-000000000000"
	st := consumertest.NewStore(time.Minute)
	co, r := pastDeadlineReader(t, st, shard)
	// The shard waits behind an open parent, so the round takes nothing.
	co.listed = map[string]consumer.Shard{"p": {ID: "p"}, shard: {ID: shard, Parent: "p"}}
	take, err := st.Acquire(t.Context(), shard, "me")
	require.NoError(t, err)
	r.LeaseRenewed(take.Lease)
	_, err = st.Acquire(t.Context(), "p", "other")
	require.NoError(t, err)
	// The reader acked up to 500 and handed the shard back: its final
	// commit landed (and the coordinator heard of it), then it released.
	require.NoError(t, st.Commit(t.Context(), take.Lease, consumer.Position{Sequence: "500"}))
	co.known.committedTo(shard, consumer.Position{Sequence: "500"}, take.Token)
	require.NoError(t, st.Release(t.Context(), take.Lease))
	st.Mu.Lock()
	require.Equal(t, "500", st.Ckpt[shard].Sequence, "the hand-back committed")
	held := st.LeaseMap[shard].Owner
	st.Mu.Unlock()
	require.Empty(t, held, "the hand-back released")
	delete(co.readers, shard)

	operatorReset(st, shard, consumer.Position{Sequence: "100"})
	co.rebalance(co.runCtx)

	p, ok := reseededTo(t, co, st, shard)
	assert.False(t, ok, "re-seeded %v ahead of the operator's reset to 100", p)
}
