package consumer

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// A shard trimmed past retention (no longer listed, ResourceNotFound on
// read) counts as closed once its delivered records are acked: its lease is
// released and it is not read again.
func TestConsumerClosesATrimmedShard(t *testing.T) {
	api := newFakeKinesis()
	const shard = "shardId-000000000000"
	api.add(shard, &fakeShard{records: 5})
	st := newFakeStore(time.Second)
	c := startConsumer(t, testConfig(), api, st)
	var b *Batch
	select {
	case b = <-c.Batches():
	case <-time.After(10 * time.Second):
		t.Fatal("no batch delivered")
	}
	api.trim(shard)
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
	api := newFakeKinesis()
	api.add("shardId-000000000000", &fakeShard{records: 1})
	cfg := testConfig()
	cfg.Streams = []string{"s", fakeARNPrefix + "s"}
	c, err := New(cfg, api, func(string) Store { return newFakeStore(time.Second) }, nil, nil)
	require.NoError(t, err)
	err = c.Start(t.Context())
	require.Error(t, err)
	assert.ErrorContains(t, err, "field streams")
	assert.ErrorContains(t, err, `"s"`)
	assert.ErrorContains(t, err, `"`+fakeARNPrefix+`s"`)
	_ = c.Close(context.Background())
}
