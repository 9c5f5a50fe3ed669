package coordinator

import (
	"context"
	"testing"
	"time"

	"github.com/connect-kinesis/connect-kinesis/internal/consumer"
	"github.com/connect-kinesis/connect-kinesis/internal/consumer/consumertest"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// A shard trimmed past retention (no longer listed, ResourceNotFound on
// read) counts as closed once its delivered records are acked: its lease is
// released and it is not read again.
func TestConsumerClosesATrimmedShard(t *testing.T) {
	api := consumertest.NewKinesis()
	const shard = "shardId-000000000000"
	api.Add(shard, &consumertest.KinesisShard{Records: 5})
	st := consumertest.NewStore(time.Second)
	c := startConsumer(t, testConfig(), api, st)
	var b *consumer.Batch
	select {
	case b = <-c.Batches():
	case <-time.After(10 * time.Second):
		t.Fatal("no batch delivered")
	}
	api.Trim(shard)
	b.Ack(nil)
	require.Eventually(t, func() bool {
		closed, _ := st.ClosedShards(t.Context())
		return closed[shard]
	}, 10*time.Second, 10*time.Millisecond, "the trimmed shard was not closed")
	leases, err := st.Leases(t.Context())
	require.NoError(t, err)
	assert.Empty(t, leases[shard].Owner, "its lease is released")
	p, _, _ := st.Checkpoint(t.Context(), shard)
	assert.True(t, p.ShardEnd)
}

// A stream listed by name and by ARN is one stream: the consumer refuses to
// start, naming both entries.
func TestConsumerRejectsOneStreamListedByNameAndARN(t *testing.T) {
	api := consumertest.NewKinesis()
	api.Add("shardId-000000000000", &consumertest.KinesisShard{Records: 1})
	cfg := testConfig()
	cfg.Streams = []string{"s", consumertest.FakeARNPrefix + "s"}
	c, err := New(cfg, api, func(string) consumer.Store { return consumertest.NewStore(time.Second) }, nil, nil)
	require.NoError(t, err)
	err = c.Start(t.Context())
	require.Error(t, err)
	assert.ErrorContains(t, err, "field streams")
	assert.ErrorContains(t, err, `"s"`)
	assert.ErrorContains(t, err, `"`+consumertest.FakeARNPrefix+`s"`)
	_ = c.Close(context.Background())
}
