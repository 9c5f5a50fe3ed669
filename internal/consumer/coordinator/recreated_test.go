package coordinator

import (
	"context"
	"testing"
	"time"

	"github.com/aws/smithy-go"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/connect-kinesis/connect-kinesis/internal/consumer"
	"github.com/connect-kinesis/connect-kinesis/internal/consumer/consumertest"
	"github.com/connect-kinesis/connect-kinesis/internal/kinesisx"
)

// A stream deleted and created again between two listings: discovery never
// sees it missing, and Kinesis answers the reader's old iterator with
// ResourceNotFound while the shard (the new stream's, same id) is listed.
// The reader re-checks the stream's creation time, so the deleted stream's
// state is cleared and the shard read anew from the group's start, instead
// of "still listed, trying again" for ever.
func TestReaderNoticesAStreamRecreatedBetweenListings(t *testing.T) {
	t.Parallel()
	api := consumertest.NewKinesis()
	const shard = "shardId-000000000000"
	api.Created = time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	api.Add(shard, &consumertest.KinesisShard{Records: 3})
	st := consumertest.NewStore(time.Second)
	cfg := testConfig()
	cfg.Backoff.MaxInterval = 20 * time.Millisecond
	c := startConsumer(t, cfg, api, st)
	read := func(n int) []string {
		var got []string
		for len(got) < n {
			select {
			case b := <-c.Batches():
				for _, r := range b.Records {
					got = append(got, string(r.Data))
				}
				b.Ack(nil)
			case <-time.After(10 * time.Second):
				t.Fatalf("only %v delivered", got)
			}
		}
		return got
	}
	require.Len(t, read(3), 3)

	recreated := api.Created.Add(time.Hour)
	api.Mu.Lock()
	api.Created = recreated
	api.GetErrors[shard] = &smithy.GenericAPIError{Code: kinesisx.CodeResourceNotFound, Message: "Shard " + shard + " does not exist"}
	api.Mu.Unlock()
	require.Eventually(t, func() bool {
		st.Mu.Lock()
		defer st.Mu.Unlock()
		return st.Created.Equal(recreated)
	}, 10*time.Second, 10*time.Millisecond, "the recreation was not noticed")

	// The new stream's shard is read from the group's start.
	api.Mu.Lock()
	delete(api.GetErrors, shard)
	api.Mu.Unlock()
	assert.Equal(t, []string{shard + "/1", shard + "/2", shard + "/3"}, read(3))
}

// An instance that finds a stream in a listing made before the stream was
// created again (the group's listing in Redis, read as it starts) clears
// nothing of the new stream: it describes the stream, and reads on from the
// new stream's checkpoints. (Soak seed 5, 1 h: b33 started with
// soak-dyn-3's previous creation time and cleared the new stream's
// checkpoints; the instances that knew the new time cleared again, and 60
// records were read again twice.)
func TestAStaleListingClearsNothingOfTheNewStream(t *testing.T) {
	t.Parallel()
	api := newStreamsAPI()
	deleted := time.Unix(1_700_000_000, 0)
	created := deleted.Add(time.Minute)
	api.create("t-1", 1, 8, created)
	stores := &storesByStream{}
	st := stores.store(consumertest.FakeARNPrefix + "t-1")
	st.Mu.Lock()
	st.Created = created
	st.Ckpt["shardId-000000000000"] = consumer.Position{Sequence: "5"}
	st.Mu.Unlock()
	var got streamLog
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	stale := api.found("t-1", consumer.StartTrimHorizon)
	stale.Created = deleted
	startFollower(ctx, t, api, stores, "a", &got, []Found{stale})
	require.Eventually(t, func() bool { n, _ := got.count("t-1"); return n >= 3 }, 10*time.Second, 20*time.Millisecond, "the new stream is read")
	time.Sleep(500 * time.Millisecond) // many poll intervals
	n, dup := got.count("t-1")
	assert.Equal(t, 3, n, "records 6 to 8: the new stream's checkpoint was kept")
	assert.Zero(t, dup)
	st.Mu.Lock()
	defer st.Mu.Unlock()
	assert.True(t, st.Created.Equal(created), "the group's creation time stays the new stream's, got %v", st.Created)
}
