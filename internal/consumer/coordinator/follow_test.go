package coordinator

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/service/kinesis/types"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/connect-kinesis/connect-kinesis/internal/consumer"
	"github.com/connect-kinesis/connect-kinesis/internal/consumer/consumertest"
)

// Streams come and go while the consumer runs, next to a named one: each
// found stream is read whole, a removed one stops with its checkpoints
// committed at its last record and its leases released, nothing of it is
// read after, a stream created again under its name is read again from its
// start, and the gauge and the log follow. Not parallel: the gauge is in
// the tests' shared exporter.
func TestFollowAddsRemovesAndRecreatesStreams(t *testing.T) {
	api := newStreamsAPI()
	created := time.Unix(1_700_000_000, 0)
	api.create("s", 1, 10, created)
	t1 := api.create("t-1", 2, 20, created)
	api.create("t-2", 1, 20, created)
	stores := &storesByStream{}
	var logs consumertest.SyncBuffer
	cfg := testConfig()
	cfg.FollowStreams = true
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	var got streamLog
	c := startAcking(ctx, t, cfg, api, stores, &logs, &got)
	gauge := func() int64 { v, _ := consumertest.Gauges.Get(consumer.MetricStreams + "{}"); return v }

	// "s" is named in the config and matches too: read once, by its
	// named coordinator.
	require.NoError(t, c.Follow(ctx, []Found{api.found("s", consumer.StartTrimHorizon), api.found("t-1", consumer.StartTrimHorizon), api.found("t-2", consumer.StartTrimHorizon)}))
	assert.Equal(t, []string{consumertest.FakeARNPrefix + "t-1", consumertest.FakeARNPrefix + "t-2"}, c.FollowedStreams())
	require.Eventually(t, func() bool {
		s, _ := got.count("s")
		a, _ := got.count("t-1")
		b, _ := got.count("t-2")
		return s == 10 && a == 40 && b == 20
	}, 15*time.Second, 20*time.Millisecond, "every record of the named stream and of both found streams")
	assert.EqualValues(t, 3, gauge())
	assert.Equal(t, 1, logs.Count("Reading stream t-1"), logs.String())

	// t-1 no longer matches: released with a final commit.
	require.NoError(t, c.Follow(ctx, []Found{api.found("t-2", consumer.StartTrimHorizon)}))
	assert.Equal(t, []string{consumertest.FakeARNPrefix + "t-2"}, c.FollowedStreams())
	assert.EqualValues(t, 2, gauge())
	assert.Equal(t, 1, logs.Count("Stopped reading stream t-1"), logs.String())
	st1 := stores.store(consumertest.FakeARNPrefix + "t-1")
	st1.Mu.Lock()
	for _, shard := range []string{"shardId-000000000000", "shardId-000000000001"} {
		assert.Empty(t, st1.LeaseMap[shard].Owner, "the lease of %s is released", shard)
		assert.Equal(t, consumertest.SeqOf(shard, 20), st1.Ckpt[shard].Sequence, "%s committed at its last record", shard)
	}
	st1.Mu.Unlock()
	t1.Mu.Lock()
	for _, s := range t1.Shards {
		s.Records = 30
	}
	t1.Mu.Unlock()

	// t-2 deleted and created again under its name, with 5 new records
	// whose data (shard/index) repeats the old stream's first five.
	api.create("t-2", 1, 5, created.Add(time.Hour))
	require.NoError(t, c.Follow(ctx, []Found{api.found("t-2", consumer.StartTrimHorizon)}))
	require.Eventually(t, func() bool {
		for i := 1; i <= 5; i++ {
			if got.times(fmt.Sprintf("t-2|shardId-000000000000/%d", i)) != 2 {
				return false
			}
		}
		return true
	}, 15*time.Second, 20*time.Millisecond, "the new t-2 is read from its start, not from the deleted one's checkpoint")
	assert.Equal(t, 1, logs.Count("read again as a new stream"), logs.String())
	assert.Equal(t, 1, logs.Count("The stream was created again"), logs.String())
	assert.Zero(t, logs.Count("level=ERROR"), "a stream of a pattern created again is no error: %s", logs.String())
	assert.EqualValues(t, 2, gauge())

	// A stream found with new_stream_start_position latest starts there.
	t3 := api.create("t-3", 1, 5, created)
	require.NoError(t, c.Follow(ctx, []Found{api.found("t-2", consumer.StartTrimHorizon), api.found("t-3", consumer.StartLatest)}))
	require.Eventually(t, func() bool {
		t3.Mu.Lock()
		defer t3.Mu.Unlock()
		return len(t3.IterReqs) > 0
	}, 10*time.Second, 20*time.Millisecond)
	t3.Mu.Lock()
	assert.Equal(t, types.ShardIteratorTypeAtTimestamp, t3.IterReqs[0].ShardIteratorType)
	t3.Mu.Unlock()
	assert.EqualValues(t, 3, gauge())

	// t-3 deleted: its coordinator says so once, at INFO, and the next
	// listing (here Follow without it) releases it.
	api.delete("t-3")
	require.Eventually(t, func() bool { return logs.Count("The stream no longer exists") == 1 }, 10*time.Second, 20*time.Millisecond, logs.String())
	require.NoError(t, c.Follow(ctx, []Found{api.found("t-2", consumer.StartTrimHorizon)}))
	assert.Equal(t, 1, logs.Count("Stopped reading stream t-3"), logs.String())
	assert.Equal(t, 1, logs.Count("The stream no longer exists"), "said once: %s", logs.String())
	assert.Zero(t, logs.Count("level=ERROR"), "a stream of a pattern deleted is no error: %s", logs.String())
	assert.EqualValues(t, 2, gauge())

	// Nothing of the released t-1 was read after it was released.
	n, _ := got.count("t-1")
	assert.Equal(t, 40, n, "records written to t-1 after its release are not read")
	s, dup := got.count("s")
	assert.Equal(t, 10, s)
	assert.Zero(t, dup, "the named stream is untouched by the streams that come and go")
}

// Follow and Close may run at once (the input stops its discovery first,
// but the consumer does not rely on it): no race, no stream left running.
func TestFollowWhileClosing(t *testing.T) {
	t.Parallel()
	api := newStreamsAPI()
	created := time.Unix(1_700_000_000, 0)
	for i := range 4 {
		api.create(fmt.Sprintf("t-%d", i), 1, 5, created)
	}
	cfg := testConfig()
	cfg.Streams, cfg.FollowStreams = nil, true
	c, err := New(cfg, api, (&storesByStream{}).get, nil, nil)
	require.NoError(t, err)
	require.NoError(t, c.Start(t.Context()))
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	go ackInto(ctx, c, &streamLog{})
	done := make(chan struct{})
	go func() {
		defer close(done)
		for i := 0; ctx.Err() == nil; i++ {
			var found []Found
			for j := range 4 {
				if (i+j)%2 == 0 {
					found = append(found, api.found(fmt.Sprintf("t-%d", j), consumer.StartTrimHorizon))
				}
			}
			if c.Follow(ctx, found) != nil {
				return // closed
			}
		}
	}()
	time.Sleep(300 * time.Millisecond)
	cctx, ccancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer ccancel()
	require.NoError(t, c.Close(cctx))
	cancel()
	<-done
	assert.Empty(t, c.FollowedStreams())
	assert.Error(t, c.AddStream(context.Background(), api.found("t-0", consumer.StartTrimHorizon)), "nothing is added after Close")
}

// Two instances read a found stream; one stops following it (its listing
// lacks it first) while records flow: its shards are handed to the other
// with a final commit, and no record is acked twice or skipped.
func TestFollowRemovedStreamIsHandedOverWithoutDuplicates(t *testing.T) {
	t.Parallel()
	api := newStreamsAPI()
	const shards, records = 4, 150
	api.create("t-1", shards, records, time.Unix(1_700_000_000, 0))
	stores := &storesByStream{}
	var got streamLog
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	found := []Found{api.found("t-1", consumer.StartTrimHorizon)}
	a := startFollower(ctx, t, api, stores, "a", &got, found)
	startFollower(ctx, t, api, stores, "b", &got, found)
	st := stores.store(consumertest.FakeARNPrefix + "t-1")
	owners := func() map[string]int {
		st.Mu.Lock()
		defer st.Mu.Unlock()
		out := map[string]int{}
		for _, l := range st.LeaseMap {
			if st.Live(l, true) {
				out[l.Owner]++
			}
		}
		return out
	}
	require.Eventually(t, func() bool { o := owners(); return o["a"] > 0 && o["b"] > 0 }, 10*time.Second, 20*time.Millisecond, "both instances read")
	n, _ := got.count("t-1")
	require.Less(t, n, shards*records, "records still flow at the hand-off")

	require.NoError(t, a.Follow(ctx, nil))
	assert.Empty(t, a.FollowedStreams())
	require.Eventually(t, func() bool { n, _ := got.count("t-1"); return n >= shards*records }, 30*time.Second, 20*time.Millisecond)
	n, dup := got.count("t-1")
	assert.Equal(t, shards*records, n, "every record once")
	assert.Zero(t, dup, "no record acked twice at the hand-off")
	assert.Equal(t, map[string]int{"b": shards}, owners(), "the instance that still follows the stream reads all of it")
}

// A followed stream deleted and created again between two listings: its
// coordinator finds out by itself (a reader's NotFound, then a describe)
// and reads the new stream from its start. The listings after that, with
// the new creation time or a stale one from before the deletion, restart
// nothing: a restart stopped readers already reading the new stream and,
// when its final commits could not land, read it again from its start
// (seed 7, 1 h: soak-dyn-2#4, unmarked, Redis having been wiped between).
func TestFollowKeepsAStreamItsCoordinatorFoundCreatedAgain(t *testing.T) {
	t.Parallel()
	api := newStreamsAPI()
	created := time.Unix(1_700_000_000, 0)
	api.create("s", 1, 0, created) // the stream the config names
	api.create("r", 1, 10, created)
	stores := &storesByStream{}
	var logs consumertest.SyncBuffer
	cfg := testConfig()
	cfg.FollowStreams = true
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	var got streamLog
	c := startAcking(ctx, t, cfg, api, stores, &logs, &got)

	old := api.found("r", consumer.StartTrimHorizon)
	require.NoError(t, c.Follow(ctx, []Found{old}))
	require.Eventually(t, func() bool { n, _ := got.count("r"); return n == 10 }, 15*time.Second, 20*time.Millisecond)

	// Created again with 15 records: the first ten repeat the deleted
	// stream's data (shard/index), the last five are new.
	api.create("r", 1, 15, created.Add(time.Hour))
	last := "r|shardId-000000000000/15"
	require.Eventually(t, func() bool { return logs.Count("The stream was created again") == 1 && got.times(last) == 1 },
		15*time.Second, 20*time.Millisecond, "the coordinator reads the new stream by itself: %s", logs.String())

	for range 3 {
		require.NoError(t, c.Follow(ctx, []Found{api.found("r", consumer.StartTrimHorizon)}))
		require.NoError(t, c.Follow(ctx, []Found{old}))
		time.Sleep(testConfig().RebalancePeriod)
	}
	assert.Zero(t, logs.Count("Stopped reading stream r"), "no listing restarts the stream: %s", logs.String())
	assert.Equal(t, []string{consumertest.FakeARNPrefix + "r"}, c.FollowedStreams())
	for i := 1; i <= 15; i++ {
		want := 1
		if i <= 10 {
			want = 2 // once from the deleted stream, once from the new one
		}
		assert.Equal(t, want, got.times(fmt.Sprintf("r|shardId-000000000000/%d", i)), "record %d", i)
	}
}
