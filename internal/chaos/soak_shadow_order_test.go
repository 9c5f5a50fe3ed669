package chaos

import (
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/kinesis"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/connect-kinesis/connect-kinesis/internal/testenv"
)

// Every stream comes first in turn, so a slow stream that uses up a poll's
// time limit cannot leave the same streams unread poll after poll.
func TestShadowPollsStartAtEachStreamInTurn(t *testing.T) {
	refs := []shadowRef{{label: "a"}, {label: "b"}, {label: "c"}}
	firsts := map[string]int{}
	for turn := range 6 {
		order := pollOrder(refs, turn)
		assert.Len(t, order, 3, "every stream in every poll")
		firsts[order[0].label]++
	}
	assert.Equal(t, map[string]int{"a": 2, "b": 2, "c": 2}, firsts)
	assert.Empty(t, pollOrder(nil, 3))
}

// A stream whose listing hangs costs a poll its own budget, not the
// poll: the streams after it are still read.
func TestShadowReadsTheOtherStreamsPastOneThatHangs(t *testing.T) {
	t.Parallel()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		if strings.Contains(string(body), `"slow"`) {
			<-r.Context().Done() // the emulator never answers for this stream
			return
		}
		w.Header().Set("Content-Type", "application/x-amz-json-1.1")
		_, _ = w.Write([]byte(`{"Shards":[]}`))
	}))
	defer srv.Close()
	kc := fakeKinesisClient(srv.URL)
	sh := &shadow{kc: kc, shards: map[string]*shadowShard{}, streamBudget: 300 * time.Millisecond}
	refs := []shadowRef{{name: "slow", label: "slow"}, {name: "fast", label: "fast"}}
	for turn := 0; turn < 2; turn++ {
		ctx, cancel := context.WithTimeout(t.Context(), 5*time.Second)
		err := sh.poll(ctx, refs)
		cancel()
		require.Error(t, err, "the slow stream's listing fails")
		assert.Contains(t, sh.polledAt, "fast", "poll %d read the stream after the slow one", turn)
		delete(sh.polledAt, "fast")
	}
	assert.NotContains(t, sh.polledAt, "slow")
	assert.Contains(t, sh.failed["slow"], "listing the shards of slow")
}

// The shadow keeps each shard's parents as the listing names them, so that
// liveness can tell a child waiting for its lineage from a stuck one.
func TestShadowKeepsEachShardsParents(t *testing.T) {
	t.Parallel()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/x-amz-json-1.1")
		switch target := r.Header.Get("X-Amz-Target"); {
		case strings.HasSuffix(target, "ListShards"):
			_, _ = w.Write([]byte(`{"Shards":[
				{"ShardId":"shardId-000000000000","SequenceNumberRange":{"StartingSequenceNumber":"1","EndingSequenceNumber":"9"}},
				{"ShardId":"shardId-000000000001","SequenceNumberRange":{"StartingSequenceNumber":"1","EndingSequenceNumber":"9"}},
				{"ShardId":"shardId-000000000002","ParentShardId":"shardId-000000000000","AdjacentParentShardId":"shardId-000000000001","SequenceNumberRange":{"StartingSequenceNumber":"10"}}]}`))
		case strings.HasSuffix(target, "GetShardIterator"):
			_, _ = w.Write([]byte(`{"ShardIterator":"it"}`))
		default: // GetRecords: a closed shard read to its end
			_, _ = w.Write([]byte(`{"Records":[],"MillisBehindLatest":0}`))
		}
	}))
	defer srv.Close()
	kc := fakeKinesisClient(srv.URL)
	sh := &shadow{kc: kc, shards: map[string]*shadowShard{}}
	require.NoError(t, sh.poll(t.Context(), []shadowRef{{name: "soak-a", label: "soak-a"}}))
	require.Contains(t, sh.shards, "soak-a/shardId-000000000002")
	assert.Equal(t, []string{"soak-a/shardId-000000000000", "soak-a/shardId-000000000001"}, sh.shards["soak-a/shardId-000000000002"].parents)
	assert.Empty(t, sh.shards["soak-a/shardId-000000000000"].parents, "a shard of the stream's creation has no parent")
}

// fakeKinesisClient is a Kinesis client of a fake endpoint, without retries.
func fakeKinesisClient(url string) *kinesis.Client {
	return testenv.KinesisClient(url, func(o *kinesis.Options) { o.Retryer = aws.NopRetryer{} })
}
