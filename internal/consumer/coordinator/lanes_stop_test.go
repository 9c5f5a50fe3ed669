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

// A reader with lanes that stops by itself (here: the stream was deleted
// and created again) ends at once when its lanes are idle, not after
// handoff_timeout: the new stream's shard is read well before that.
func TestAReaderWithIdleLanesThatStopsItselfDoesNotWaitForTheHandOffTimeout(t *testing.T) {
	t.Parallel()
	api := consumertest.NewKinesis()
	const shard = "shardId-000000000000"
	api.Created = time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	api.Add(shard, &consumertest.KinesisShard{Records: 3})
	st := consumertest.NewStore(time.Second)
	cfg := testConfig()
	cfg.ShardParallelism = 4
	cfg.HandoffTimeout = time.Minute
	cfg.Backoff.MaxInterval = 20 * time.Millisecond
	c := startConsumer(t, cfg, api, st)
	read := func(n int, within time.Duration) []string {
		var got []string
		deadline := time.After(within)
		for len(got) < n {
			select {
			case b := <-c.Batches():
				for _, r := range b.Records {
					got = append(got, string(r.Data))
				}
				b.Ack(nil)
			case <-deadline:
				t.Fatalf("only %v delivered within %v (handoff_timeout %v)", got, within, cfg.HandoffTimeout)
			}
		}
		return got
	}
	require.Len(t, read(3, 10*time.Second), 3)

	api.Mu.Lock()
	api.Created = api.Created.Add(time.Hour)
	api.GetErrors[shard] = &smithy.GenericAPIError{Code: kinesisx.CodeResourceNotFound, Message: "Shard " + shard + " does not exist"}
	api.Mu.Unlock()
	require.Eventually(t, func() bool {
		st.Mu.Lock()
		defer st.Mu.Unlock()
		return !st.Created.Equal(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))
	}, 10*time.Second, 10*time.Millisecond, "the recreation was not handled: the reader that stopped itself did not end")
	api.Mu.Lock()
	delete(api.GetErrors, shard)
	api.Mu.Unlock()
	got := read(3, 15*time.Second)
	assert.ElementsMatch(t, []string{shard + "/1", shard + "/2", shard + "/3"}, got)
}
