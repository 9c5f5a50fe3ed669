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

// claimedBack makes the store show what a re-seed of the shard's earlier
// holder leaves when it wins the shard back (the tie rule, or a
// provisional shard claimed by a holder of the kept record): its live
// lease under token, its own position, earlier than the one this instance
// reached from an emptied store's later `latest`.
func claimedBack(st *consumertest.Store, shard string, token int64, at consumer.Position) {
	st.Mu.Lock()
	defer st.Mu.Unlock()
	st.LeaseMap[shard] = consumer.Lease{Shard: shard, Owner: "holder", Token: token, ExpiresAt: time.Now().Add(time.Minute)}
	st.Ckpt[shard] = at
}

// holderReseeds is a later wipe after which the holder re-seeds its own
// position first: the store forgets everything but the holder's lease and
// position.
func holderReseeds(st *consumertest.Store, shard string, at consumer.Position) {
	forget(st)
	st.Mu.Lock()
	defer st.Mu.Unlock()
	st.Ckpt[shard] = at
}

// A commit that ran in the store while this instance held the shard, whose
// reply the reader handles only after this instance learned that another
// owner holds the shard, does not put the forgotten position back: after a
// later wipe it was re-seeded, and the store kept it as the later one over
// the holder's and passed records no one had delivered. Every way of
// learning it is covered: a re-seed that reports the shard lost, a renewal
// that finds the lease held by another instance, a balancing round that
// sees a newer token (superseded, after a renewal that could not read who
// held the lease), and a re-seed whose group record lost.
//
// Guards: a late commit reply put back a position that known.newerOwner (or
// superseded, or the record-lost forget) had forgotten (the skip: the
// store's checkpoint 12 past the holder's 3).
func TestALateCommitReplyDoesNotPutBackAPositionForgottenForANewerOwner(t *testing.T) {
	t.Parallel()
	const shard = "s0"
	for _, tc := range []struct {
		learned string
		// took: the shard had a position at the take (10, reached from an
		// emptied store's later `latest`), so one is known before the
		// commit's reply; else none is.
		took bool
	}{
		{"re-seed", true}, {"re-seed", false},
		{"renewal", true}, {"renewal", false},
		{"round", true},
		{"record lost", true}, {"record lost", false},
	} {
		learned := tc.learned
		name := learned
		if !tc.took {
			name += ", nothing known before"
		}
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			st := consumertest.NewStore(time.Minute)
			co := balancingCoordinator(st, "me", []string{shard})
			co.runCtx = t.Context()
			if tc.took {
				st.Mu.Lock()
				st.Ckpt[shard] = consumer.Position{Sequence: "10"}
				st.Mu.Unlock()
			}
			take, err := st.Acquire(t.Context(), shard, "me")
			require.NoError(t, err)
			co.known.take(take)
			l := take.Lease
			l.Deadline = time.Now().Add(time.Minute)
			r := newFakeReader(shard, l)
			co.readers[shard] = r
			// The reader's commit of 12 runs in the store under its lease;
			// its reply is not handled yet.
			require.NoError(t, st.Commit(t.Context(), take.Lease, consumer.Position{Sequence: "12"}))

			// The earlier holder wins the shard back with its position 3,
			// under a token no higher than this instance's (tokens started
			// again at 1 on the emptied store), or, for a balancing round
			// to tell, a higher one.
			token := take.Token
			if learned == "round" {
				token++
			}
			claimedBack(st, shard, token, consumer.Position{Sequence: "3"})
			switch learned {
			case "re-seed":
				co.reseed(co.runCtx)
			case "renewal":
				co.stopLost(co.runCtx, map[string]shardReader{shard: r}, []string{shard})
			case "round":
				r.MarkLost()
				co.rebalance(co.runCtx)
			case "record lost":
				r.MarkLost()
				st.Mu.Lock()
				st.RecordLost = true
				st.Mu.Unlock()
				co.reseed(co.runCtx)
				st.Mu.Lock()
				st.RecordLost = false
				st.Mu.Unlock()
			}
			require.True(t, r.Lost(), "the reader is stopped as lost")

			// Now the commit's reply reaches the reader's callback.
			// The lost reader is still ending when the next wipe comes (once
			// the run loop forgets it, its position goes anyway).
			co.readerStream().Committed(shard, consumer.Position{Sequence: "12"}, take.Token)

			holderReseeds(st, shard, consumer.Position{Sequence: "3"})
			co.reseed(co.runCtx)
			st.Mu.Lock()
			defer st.Mu.Unlock()
			assert.Equal(t, consumer.Position{Sequence: "3"}, st.Ckpt[shard],
				"after the %s found the shard taken, a late commit reply put 12 back and a later re-seed wrote it over the holder's 3", learned)
		})
	}
}

// A reader whose own commit (or hand-back's commit, or close) the store
// fenced is marked lost by the reader itself: no renewal or re-seed learns
// of a newer owner (newerOwner), and a holder that won the shard back at a
// re-seed under the same token (the tie rule, after a wipe tokens start
// again at 1) is no newer token for a balancing round (superseded). Until
// the run loop forgets the ending reader (gaveUp), its position was still
// known, and a re-seed after a wipe in that window wrote it over the
// holder's; the store kept it as the later one and passed records no one
// had delivered. The window lasts as long as the lost reader waits for a
// batch in the pipeline (a slow or stuck output).
//
// Guards: a re-seed wrote the known position of a shard whose reader here
// was lost by its own fenced commit and had not ended yet (the store's
// checkpoint 12 past the holder's 3).
func TestAFencedReadersPositionIsNotReseededOverAHolderThatWonTheShardBack(t *testing.T) {
	t.Parallel()
	const shard = "s0"
	st := consumertest.NewStore(time.Minute)
	co := balancingCoordinator(st, "me", []string{shard})
	co.runCtx = t.Context()
	// Taken from 10, a position reached from an emptied store's later
	// `latest`, and read on to 12, committed and heard of.
	st.Mu.Lock()
	st.Ckpt[shard] = consumer.Position{Sequence: "10"}
	st.Mu.Unlock()
	take, err := st.Acquire(t.Context(), shard, "me")
	require.NoError(t, err)
	co.known.take(take)
	l := take.Lease
	l.Deadline = time.Now().Add(time.Minute)
	r := newFakeReader(shard, l)
	co.readers[shard] = r
	require.NoError(t, st.Commit(t.Context(), take.Lease, consumer.Position{Sequence: "12"}))
	co.readerStream().Committed(shard, consumer.Position{Sequence: "12"}, take.Token)

	// The earlier holder wins the shard back at its re-seed under the same
	// token; the reader's next commit is fenced and the reader marks
	// itself lost (reader.commit), which no renewal or round hears of.
	claimedBack(st, shard, take.Token, consumer.Position{Sequence: "3"})
	require.ErrorIs(t, st.Commit(t.Context(), take.Lease, consumer.Position{Sequence: "14"}), consumer.ErrLeaseLost)
	r.MarkLost()
	co.rebalance(co.runCtx)

	// The lost reader is still ending (a batch in the pipeline) when the
	// next wipe comes, and the holder re-seeds first.
	holderReseeds(st, shard, consumer.Position{Sequence: "3"})
	co.reseed(co.runCtx)
	st.Mu.Lock()
	defer st.Mu.Unlock()
	assert.Equal(t, consumer.Position{Sequence: "3"}, st.Ckpt[shard],
		"a re-seed wrote the fenced reader's 12 over the holder's 3")
}
