package coordinator

import (
	"testing"
	"time"

	"github.com/aws/smithy-go"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

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
