package consumer

import (
	"context"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/kinesis/types"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestConsumerSplitsKPLAggregates(t *testing.T) {
	api := newFakeKinesis()
	const shard = "shardId-000000000000"
	api.add(shard, &fakeShard{records: 4, aggregate: 3})
	cfg := testConfig()
	cfg.Deaggregate = true
	c := startConsumer(t, cfg, api, newFakeStore(time.Second))
	var recs []Record
	for len(recs) < 12 {
		select {
		case b := <-c.Batches():
			recs = append(recs, b.Records...)
			b.Ack(nil)
		case <-time.After(10 * time.Second):
			t.Fatalf("only %d user records delivered", len(recs))
		}
	}
	for i, r := range recs {
		assert.True(t, r.Aggregated)
		assert.Equal(t, seqOf(shard, i/3+1), r.Sequence)
		assert.Equal(t, int64(i%3), r.SubSequence)
		assert.Equal(t, shard+"/"+itoa(i/3+1)+"."+itoa(i%3), string(r.Data))
	}
}

func TestConsumerResumesInsideAnAggregate(t *testing.T) {
	api := newFakeKinesis()
	const shard = "shardId-000000000000"
	api.add(shard, &fakeShard{records: 3, aggregate: 3})
	st := newFakeStore(time.Second)
	// A checkpoint inside record 2: its sub-records 0 and 1 are done.
	st.ckpt[shard] = Position{Sequence: seqOf(shard, 2), SubSequence: 1, HasSub: true}
	cfg := testConfig()
	cfg.Deaggregate = true
	c := startConsumer(t, cfg, api, st)
	var got []string
	ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
	defer cancel()
	for len(got) < 4 {
		select {
		case b := <-c.Batches():
			for _, r := range b.Records {
				got = append(got, string(r.Data))
			}
			b.Ack(nil)
		case <-ctx.Done():
			t.Fatalf("got only %v", got)
		}
	}
	assert.Equal(t, []string{shard + "/2.2", shard + "/3.0", shard + "/3.1", shard + "/3.2"}, got)
	api.mu.Lock()
	defer api.mu.Unlock()
	require.NotEmpty(t, api.iterReqs)
	assert.Equal(t, types.ShardIteratorTypeAtSequenceNumber, api.iterReqs[0].ShardIteratorType)
	assert.Equal(t, seqOf(shard, 2), aws.ToString(api.iterReqs[0].StartingSequenceNumber))
}
