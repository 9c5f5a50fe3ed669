package checkpointer

import (
	"fmt"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/connect-kinesis/connect-kinesis/internal/consumer"
	"github.com/connect-kinesis/connect-kinesis/internal/testenv"
)

// An instance reading many streams checks every stream's group record, and
// heartbeats in every stream, in one Redis call (issue 37's steady-state
// cost), and still tells each stream's answer apart: a stream whose record
// is gone or replaced is forgotten, the others are not, and a store that
// never joined is skipped.
func TestIntegrationGroupChecksAndHeartbeatsAreOneCallForEveryStream(t *testing.T) {
	t.Parallel()
	red := testenv.NewRedis(t)
	ck, hook := countedCheckpointer(t, red.URL(), "g")

	const streams = 20
	stores := make([]consumer.Store, streams)
	for i := range stores {
		s := ck.Stream(fmt.Sprintf("arn:aws:kinesis:us-east-1:000000000000:stream/s-%d", i))
		if i != streams-1 { // the last one never joins
			_, err := s.Join(t.Context())
			require.NoError(t, err)
		}
		stores[i] = s
	}
	first := stores[0].(*Store)
	first.CheckGroups(t.Context(), stores) // loads the script (EVALSHA, NOSCRIPT, EVAL)

	before := hook.n.Load()
	errs := first.CheckGroups(t.Context(), stores)
	assert.Equal(t, int64(1), hook.n.Load()-before, "one call for %d streams", streams)
	for i, err := range errs {
		assert.NoError(t, err, "stream %d", i)
	}

	admin := red.Client()
	defer admin.Close()
	require.NoError(t, admin.Del(t.Context(), stores[3].(*Store).Keys().Epoch).Err())
	require.NoError(t, admin.HSet(t.Context(), stores[7].(*Store).Keys().Epoch, "id", "someone-else").Err())
	errs = first.CheckGroups(t.Context(), stores)
	for i, err := range errs {
		switch i {
		case 3:
			assert.ErrorIs(t, err, consumer.ErrStoreForgot, "record gone")
			assert.ErrorContains(t, err, "found none")
		case 7:
			assert.ErrorIs(t, err, consumer.ErrStoreForgot, "record replaced")
			assert.ErrorContains(t, err, "found someone-else")
		default:
			assert.NoError(t, err, "stream %d", i)
		}
	}

	require.NoError(t, admin.FlushAll(t.Context()).Err())
	errs = first.CheckGroups(t.Context(), stores)
	for i, err := range errs[:streams-1] {
		assert.ErrorIs(t, err, consumer.ErrStoreForgot, "stream %d after FLUSHALL", i)
	}
	assert.NoError(t, errs[streams-1], "a store that never joined knows no record to check")

	// The member's heartbeats go the same way: one call for every stream,
	// each of which then lists the member as live.
	before = hook.n.Load()
	for i, err := range first.HeartbeatAll(t.Context(), "m-1", stores) {
		require.NoError(t, err, "stream %d", i)
	}
	assert.Equal(t, int64(2), hook.n.Load()-before, "one call for %d streams (and the script's first load)", streams)
	before = hook.n.Load()
	for i, err := range first.HeartbeatAll(t.Context(), "m-1", stores) {
		require.NoError(t, err, "stream %d", i)
	}
	assert.Equal(t, int64(1), hook.n.Load()-before, "one call for %d streams", streams)
	for i, st := range stores {
		live, err := st.LiveMembers(t.Context())
		require.NoError(t, err)
		assert.Equal(t, []string{"m-1"}, live, "stream %d", i)
	}

	// A Redis that does not answer fails every stream's check, none forgot.
	red.Stop()
	errs = first.CheckGroups(t.Context(), stores)
	for i, err := range errs[:streams-1] {
		require.Error(t, err, "stream %d", i)
		assert.NotErrorIs(t, err, consumer.ErrStoreForgot)
	}
	for i, err := range first.HeartbeatAll(t.Context(), "m-1", stores) {
		assert.Error(t, err, "stream %d", i)
	}
}

// One renewal call for every stream an instance reads: each stream gets
// RenewAll's answer for its own leases, a lease another owner took is
// lost in its stream alone, a stream whose group record is gone is
// forgotten alone, and the progress of every stream is one call too.
func TestIntegrationRenewalsAndProgressAreOneCallForEveryStream(t *testing.T) {
	t.Parallel()
	red := testenv.NewRedis(t)
	ck, hook := countedCheckpointer(t, red.URL(), "g")

	const streams = 6
	stores := make([]consumer.Store, streams)
	leases := make([][]consumer.Lease, streams)
	for i := range stores {
		s := ck.Stream(fmt.Sprintf("arn:aws:kinesis:us-east-1:000000000000:stream/r-%d", i))
		_, err := s.Join(t.Context())
		require.NoError(t, err)
		for _, shard := range []string{"shard-0", "shard-1"} {
			leases[i] = append(leases[i], mustAcquire(t, s, shard))
		}
		stores[i] = s
	}
	leases[4] = nil // a stream with no lease to renew is left out
	first := stores[0].(*Store)
	first.RenewStreams(t.Context(), "a", stores, leases) // loads the script

	before := hook.n.Load()
	res := first.RenewStreams(t.Context(), "a", stores, leases)
	assert.Equal(t, int64(1), hook.n.Load()-before, "one call for %d streams", streams)
	for i, r := range res {
		require.NoError(t, r.Err, "stream %d", i)
		assert.Empty(t, r.Lost, "stream %d", i)
		assert.Len(t, r.Renewed, len(leases[i]), "stream %d", i)
		for _, l := range r.Renewed {
			assert.True(t, l.ExpiresAt.After(time.Now()), "stream %d %s", i, l.Shard)
		}
	}

	// Another owner takes shard-1 of stream 2 (its lease expired), and
	// stream 3's group record is gone.
	admin := red.Client()
	defer admin.Close()
	require.NoError(t, admin.HSet(t.Context(), stores[2].(*Store).Keys().Leases, "shard-1", "b|1|9").Err())
	require.NoError(t, admin.Del(t.Context(), stores[3].(*Store).Keys().Epoch).Err())
	res = first.RenewStreams(t.Context(), "a", stores, leases)
	for i, r := range res {
		switch i {
		case 2:
			require.NoError(t, r.Err)
			assert.Equal(t, []string{"shard-1"}, r.Lost)
			require.Len(t, r.Renewed, 1)
			assert.Equal(t, "shard-0", r.Renewed[0].Shard)
		case 3:
			assert.ErrorIs(t, r.Err, consumer.ErrStoreForgot)
		default:
			require.NoError(t, r.Err, "stream %d", i)
			assert.Empty(t, r.Lost, "stream %d", i)
			assert.Len(t, r.Renewed, len(leases[i]), "stream %d", i)
		}
	}

	ps := make([]map[string]consumer.Progress, streams)
	for i := range ps {
		ps[i] = map[string]consumer.Progress{"shard-0": {LagMillis: int64(100 * i), BytesPerSecond: 7}}
	}
	first.PublishProgressAll(t.Context(), "a", stores, ps) // loads the script
	before = hook.n.Load()
	for i, err := range first.PublishProgressAll(t.Context(), "a", stores, ps) {
		require.NoError(t, err, "stream %d", i)
	}
	assert.Equal(t, int64(1), hook.n.Load()-before, "one call for %d streams", streams)
	for i, st := range stores {
		got, err := st.(*Store).Progress(t.Context())
		require.NoError(t, err)
		if i == 3 {
			continue // its record is gone, not its leases: written or not, nobody reads it
		}
		require.Contains(t, got, "shard-0", "stream %d", i)
		assert.Equal(t, int64(100*i), got["shard-0"].LagMillis, "stream %d", i)
		assert.Equal(t, "a", got["shard-0"].Owner, "stream %d", i)
	}
}

// A balancing round reads its stream's state in one call, and reads what
// the four calls it replaces read, with their effects: a silent member is
// dropped, a request of a dead requester deleted, and a store that forgot
// says so.
func TestIntegrationRoundIsOneCall(t *testing.T) {
	t.Parallel()
	red := testenv.NewRedis(t)
	ck, hook := countedCheckpointer(t, red.URL(), "g")
	s := ck.Stream("arn:aws:kinesis:us-east-1:000000000000:stream/round")
	ctx := t.Context()
	_, err := s.Join(ctx)
	require.NoError(t, err)
	for _, m := range []string{"a", "b", "c"} {
		require.NoError(t, s.Heartbeat(ctx, m))
	}
	l0 := mustAcquire(t, s, "shard-0")
	_ = mustAcquire(t, s, "shard-1")
	require.NoError(t, s.CloseShard(ctx, mustAcquire(t, s, "shard-p")))
	require.NoError(t, s.RequestHandoff(ctx, "shard-0", "b"))
	require.NoError(t, s.RequestHandoff(ctx, "shard-1", "gone")) // never heartbeat
	admin := red.Client()
	defer admin.Close()
	require.NoError(t, admin.ZAdd(ctx, s.Keys().Members, redis.Z{Score: 1, Member: "c"}).Err()) // c went silent long ago

	_, _ = s.ReadRound(ctx, "a") // loads the script
	require.NoError(t, s.RequestHandoff(ctx, "shard-1", "gone"))
	before := hook.n.Load()
	rd, err := s.ReadRound(ctx, "a")
	require.NoError(t, err)
	assert.Equal(t, int64(1), hook.n.Load()-before, "one call")
	assert.Equal(t, []string{"a", "b"}, rd.Members, "the silent member is dropped")
	assert.Equal(t, map[string]bool{"shard-p": true}, rd.Closed)
	assert.Equal(t, map[string]string{"shard-0": "b"}, rd.Handoffs, "the dead requester's request is not listed")
	n, err := admin.HExists(ctx, s.Keys().Handoff, "shard-1").Result()
	require.NoError(t, err)
	assert.False(t, n, "and deleted")

	leases, err := s.Leases(ctx)
	require.NoError(t, err)
	require.Len(t, rd.Leases, len(leases))
	for shard, st := range leases {
		got := rd.Leases[shard]
		assert.Equal(t, st.Owner, got.Owner, shard)
		assert.Equal(t, st.Token, got.Token, shard)
		assert.Equal(t, st.Expired, got.Expired, shard)
	}
	assert.Equal(t, l0.Token, rd.Leases["shard-0"].Token)

	require.NoError(t, admin.FlushAll(ctx).Err())
	_, err = s.ReadRound(ctx, "a")
	assert.ErrorIs(t, err, consumer.ErrStoreForgot)
}

// The balancing rounds of every stream an instance reads are one call too
// (rounds.lua), and each stream's answer is ReadRound's with its effects:
// a silent member dropped, a dead requester's request deleted; a stream
// whose group record is gone says so alone, and a store that never joined
// reads its round unchecked.
func TestIntegrationRoundsAreOneCallForEveryStream(t *testing.T) {
	t.Parallel()
	red := testenv.NewRedis(t)
	ck, hook := countedCheckpointer(t, red.URL(), "g")
	ctx := t.Context()
	admin := red.Client()
	defer admin.Close()
	const streams = 8
	stores := make([]consumer.Store, streams)
	for i := range stores {
		s := ck.Stream(fmt.Sprintf("arn:aws:kinesis:us-east-1:000000000000:stream/rr-%d", i))
		stores[i] = s
		if i == streams-1 {
			continue // never joins
		}
		_, err := s.Join(ctx)
		require.NoError(t, err)
		for _, m := range []string{"a", "b"} {
			require.NoError(t, s.Heartbeat(ctx, m))
		}
		require.NoError(t, admin.ZAdd(ctx, s.Keys().Members, redis.Z{Score: 1, Member: "c"}).Err()) // silent long ago
		_ = mustAcquire(t, s, "shard-0")
		require.NoError(t, s.CloseShard(ctx, mustAcquire(t, s, fmt.Sprintf("shard-p%d", i))))
		require.NoError(t, s.RequestHandoff(ctx, "shard-0", "b"))
		require.NoError(t, s.RequestHandoff(ctx, "shard-1", "gone")) // never heartbeat
	}
	first := stores[0].(*Store)
	first.ReadRounds(ctx, "a", stores, true) // loads the script
	for i := range streams - 1 {
		require.NoError(t, stores[i].RequestHandoff(ctx, "shard-1", "gone"))
	}
	require.NoError(t, admin.Del(ctx, stores[3].(*Store).Keys().Epoch).Err()) // stream 3's record is gone

	for i := range streams - 1 {
		require.NoError(t, stores[i].PublishProgress(ctx, "a", map[string]consumer.Progress{"shard-0": {LagMillis: 5, BytesPerSecond: int64(100 * (i + 1))}}))
	}
	before := hook.n.Load()
	rounds, errs := first.ReadRounds(ctx, "a", stores, true)
	assert.Equal(t, int64(1), hook.n.Load()-before, "one call for %d streams, their loads too", streams)
	require.Len(t, rounds, streams)
	for i := range streams - 1 {
		s := stores[i].(*Store)
		if i == 3 {
			assert.ErrorIs(t, errs[i], consumer.ErrStoreForgot, "the stream whose record is gone")
			continue
		}
		require.NoError(t, errs[i], "stream %d", i)
		rd := rounds[i]
		assert.Equal(t, []string{"a", "b"}, rd.Members, "stream %d: the silent member is dropped", i)
		assert.Equal(t, map[string]bool{fmt.Sprintf("shard-p%d", i): true}, rd.Closed, "stream %d", i)
		assert.Equal(t, map[string]string{"shard-0": "b"}, rd.Handoffs, "stream %d: the dead requester's request is not listed", i)
		gone, err := admin.HExists(ctx, s.Keys().Handoff, "shard-1").Result()
		require.NoError(t, err)
		assert.False(t, gone, "stream %d: and deleted", i)
		loads, err := s.ShardLoads(ctx)
		require.NoError(t, err)
		assert.Equal(t, loads, rd.Loads, "stream %d: the loads ShardLoads reads", i)
		assert.Equal(t, int64(100*(i+1)), rd.Loads["shard-0"].BytesPerSecond, "stream %d", i)
		one, err := s.ReadRound(ctx, "a")
		require.NoError(t, err)
		assert.Equal(t, one.Members, rd.Members)
		assert.Equal(t, one.Closed, rd.Closed)
		require.Len(t, rd.Leases, len(one.Leases))
		for shard, st := range one.Leases {
			assert.Equal(t, st.Owner, rd.Leases[shard].Owner, shard)
			assert.Equal(t, st.Token, rd.Leases[shard].Token, shard)
		}
	}
	require.NoError(t, errs[streams-1], "a store that never joined reads its round unchecked")
	assert.Empty(t, rounds[streams-1].Leases)

	rounds, errs = first.ReadRounds(ctx, "a", stores, false)
	require.NoError(t, errs[0])
	assert.Nil(t, rounds[0].Loads, "by count, no loads are read")
}
