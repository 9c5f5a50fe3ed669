package coordinator

import (
	"context"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/kinesis/types"
	"github.com/connect-kinesis/connect-kinesis/internal/consumer"
	"github.com/connect-kinesis/connect-kinesis/internal/consumer/consumertest"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestConsumerSplitsKPLAggregates(t *testing.T) {
	api := consumertest.NewKinesis()
	const shard = "shardId-000000000000"
	api.Add(shard, &consumertest.KinesisShard{Records: 4, Aggregate: 3})
	cfg := testConfig()
	cfg.Deaggregate = true
	c := startConsumer(t, cfg, api, consumertest.NewStore(time.Second))
	var recs []consumer.Record
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
		assert.Equal(t, consumertest.SeqOf(shard, i/3+1), r.Sequence)
		assert.Equal(t, int64(i%3), r.SubSequence)
		assert.Equal(t, shard+"/"+itoa(i/3+1)+"."+itoa(i%3), string(r.Data))
	}
}

func TestConsumerResumesInsideAnAggregate(t *testing.T) {
	api := consumertest.NewKinesis()
	const shard = "shardId-000000000000"
	api.Add(shard, &consumertest.KinesisShard{Records: 3, Aggregate: 3})
	st := consumertest.NewStore(time.Second)
	// A checkpoint inside record 2: its sub-records 0 and 1 are done.
	st.Ckpt[shard] = consumer.Position{Sequence: consumertest.SeqOf(shard, 2), SubSequence: 1, HasSub: true}
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
	api.Mu.Lock()
	defer api.Mu.Unlock()
	require.NotEmpty(t, api.IterReqs)
	assert.Equal(t, types.ShardIteratorTypeAtSequenceNumber, api.IterReqs[0].ShardIteratorType)
	assert.Equal(t, consumertest.SeqOf(shard, 2), aws.ToString(api.IterReqs[0].StartingSequenceNumber))
}

// A batch that ends inside an aggregate commits "<seq>/<subseq>"; a restart
// resumes after the last acked user record, inside the aggregate.
func TestConsumerCommitsInsideAnAggregateAndResumesThere(t *testing.T) {
	api := consumertest.NewKinesis()
	const shard = "shardId-000000000000"
	api.Add(shard, &consumertest.KinesisShard{Records: 3, Aggregate: 3})
	st := consumertest.NewStore(time.Second)
	cfg := testConfig()
	cfg.Deaggregate = true
	cfg.Limit = 2 // batches of two user records: 1.0 1.1 | 1.2 2.0 | 2.1 2.2 | ...
	c := startConsumer(t, cfg, api, st)
	next := func(c *Consumer) *consumer.Batch {
		t.Helper()
		select {
		case b := <-c.Batches():
			return b
		case <-time.After(10 * time.Second):
			t.Fatal("no batch delivered")
			return nil
		}
	}
	var got []string
	for range 2 {
		b := next(c)
		for _, r := range b.Records {
			got = append(got, string(r.Data))
		}
		b.Ack(nil)
	}
	require.Equal(t, []string{shard + "/1.0", shard + "/1.1", shard + "/1.2", shard + "/2.0"}, got)
	_ = next(c) // in flight, never acked
	ctx, cancel := context.WithTimeout(t.Context(), 5*time.Second)
	defer cancel()
	require.NoError(t, c.Close(ctx))
	p, ok, err := st.Checkpoint(t.Context(), shard)
	require.NoError(t, err)
	require.True(t, ok)
	assert.Equal(t, consumertest.SeqOf(shard, 2)+"/0", p.String(), "the checkpoint is the last acked user record, inside aggregate 2")

	c2 := startConsumer(t, cfg, api, st)
	b := next(c2)
	assert.Equal(t, shard+"/2.1", string(b.Records[0].Data), "a restart resumes inside the aggregate")
}

// With deaggregate off, a checkpoint inside an aggregate (written by a run
// that split them) does not skip the rest of it: the aggregate is
// delivered whole again.
func TestConsumerWithoutDeaggregateDeliversAPartlyDoneAggregateWhole(t *testing.T) {
	api := consumertest.NewKinesis()
	const shard = "shardId-000000000000"
	api.Add(shard, &consumertest.KinesisShard{Records: 3, Aggregate: 3})
	st := consumertest.NewStore(time.Second)
	st.Ckpt[shard] = consumer.Position{Sequence: consumertest.SeqOf(shard, 2), SubSequence: 1, HasSub: true}
	cfg := testConfig()
	cfg.Deaggregate = false
	c := startConsumer(t, cfg, api, st)
	var got []consumer.Record
	for len(got) < 2 {
		select {
		case b := <-c.Batches():
			got = append(got, b.Records...)
			b.Ack(nil)
		case <-time.After(10 * time.Second):
			t.Fatalf("only %d records delivered", len(got))
		}
	}
	require.Len(t, got, 2)
	assert.Equal(t, consumertest.SeqOf(shard, 2), got[0].Sequence, "aggregate 2 is delivered again, whole")
	assert.False(t, got[0].Aggregated)
	assert.Equal(t, consumertest.SeqOf(shard, 3), got[1].Sequence)
}
