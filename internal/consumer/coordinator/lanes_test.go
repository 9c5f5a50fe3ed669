package coordinator

import (
	"context"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/connect-kinesis/connect-kinesis/internal/consumer"
	"github.com/connect-kinesis/connect-kinesis/internal/consumer/consumertest"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// laneRun reads a shard of 200 records with 40 keys in 4 lanes, holding
// every batch until four are out and acking them newest first, so lanes
// finish out of order. It returns the records in delivery order.
func TestConsumerWithLanesKeepsKeyOrderAndCommitsContiguously(t *testing.T) {
	api := consumertest.NewKinesis()
	const shard = "shardId-000000000000"
	api.Add(shard, &consumertest.KinesisShard{Records: 200, Keys: 40})
	st := consumertest.NewStore(time.Second)
	cfg := testConfig()
	cfg.ShardParallelism = 4
	c := startConsumer(t, cfg, api, st)

	var delivered []string
	var held []*consumer.Batch
	deadline := time.After(20 * time.Second)
	for len(delivered) < 200 {
		select {
		case b := <-c.Batches():
			assert.LessOrEqual(t, len(b.Records), cfg.Limit)
			for _, r := range b.Records {
				delivered = append(delivered, string(r.Data))
			}
			held = append(held, b)
		case <-time.After(100 * time.Millisecond):
		case <-deadline:
			t.Fatalf("only %d of 200 records delivered", len(delivered))
		}
		// Several lanes have a batch out at once; ack the newest first.
		if len(held) >= 4 || len(delivered) == 200 {
			for i := len(held) - 1; i >= 0; i-- {
				held[i].Ack(nil)
			}
			held = nil
		}
	}
	assertKeyOrder(t, delivered, 40)
	require.Eventually(t, func() bool {
		p, ok, _ := st.Checkpoint(t.Context(), shard)
		return ok && p.Sequence == consumertest.SeqOf(shard, 200)
	}, 10*time.Second, 10*time.Millisecond, "the checkpoint reaches the last record once every lane acked")
}

func TestConsumerWithLanesRedeliversANackedLaneWhileOthersGoOn(t *testing.T) {
	api := consumertest.NewKinesis()
	const shard = "shardId-000000000000"
	api.Add(shard, &consumertest.KinesisShard{Records: 40, Keys: 8})
	st := consumertest.NewStore(time.Second)
	cfg := testConfig()
	cfg.ShardParallelism = 4
	cfg.Limit = 5
	c := startConsumer(t, cfg, api, st)
	next := func() *consumer.Batch {
		select {
		case b := <-c.Batches():
			return b
		case <-time.After(10 * time.Second):
			t.Fatal("no batch delivered")
			return nil
		}
	}

	// The first batch is nacked; its lane is stuck until it is acked.
	nacked := next()
	nackedKeys := map[string]bool{}
	for _, r := range nacked.Records {
		nackedKeys[r.PartitionKey] = true
	}
	nacked.Ack(assert.AnError)

	var delivered []string
	redelivered := false
	ctx, cancel := context.WithTimeout(t.Context(), 20*time.Second)
	defer cancel()
	for len(delivered) < 40 {
		var b *consumer.Batch
		select {
		case b = <-c.Batches():
		case <-ctx.Done():
			t.Fatalf("only %d of 40 records acked", len(delivered))
		}
		if b == nacked {
			redelivered = true
		} else if !redelivered {
			for _, r := range b.Records {
				assert.False(t, nackedKeys[r.PartitionKey], "key %s of the nacked batch was delivered before the batch was sent again", r.PartitionKey)
			}
			p, ok, _ := st.Checkpoint(t.Context(), shard)
			assert.False(t, ok && seqNum(t, p.Sequence) >= seqNum(t, nacked.Records[0].Sequence), "the checkpoint passed the nacked batch: %v", p)
		}
		for _, r := range b.Records {
			delivered = append(delivered, string(r.Data))
		}
		b.Ack(nil)
	}
	assert.True(t, redelivered, "the nacked batch was sent again")
	assertKeyOrder(t, delivered, 8)
	require.Eventually(t, func() bool {
		p, ok, _ := st.Checkpoint(t.Context(), shard)
		return ok && p.Sequence == consumertest.SeqOf(shard, 40)
	}, 10*time.Second, 10*time.Millisecond)
}

// assertKeyOrder checks that every record "<shard>/<i>" appears exactly
// once and, per key (i mod keys), in ascending order.
func assertKeyOrder(t *testing.T, delivered []string, keys int) {
	t.Helper()
	last := map[int]int{}
	seen := map[int]bool{}
	for _, d := range delivered {
		_, num, _ := strings.Cut(d, "/")
		i, err := strconv.Atoi(num)
		require.NoError(t, err)
		assert.False(t, seen[i], "record %d delivered twice", i)
		seen[i] = true
		k := i % keys
		assert.Greater(t, i, last[k], "key k%d: record %d after %d", k, i, last[k])
		last[k] = i
	}
}

func seqNum(t *testing.T, seq string) int {
	t.Helper()
	n, err := strconv.Atoi(seq)
	require.NoError(t, err)
	return n
}

func TestConfigValidateShardParallelism(t *testing.T) {
	cfg := testConfig()
	cfg.ShardParallelism = consumer.MaxShardParallelism + 1
	err := cfg.Validate()
	require.Error(t, err)
	assert.Contains(t, err.Error(), "field shard_parallelism")

	cfg.ShardParallelism, cfg.ShardMaxInFlight = 4, 2
	err = cfg.Validate()
	require.Error(t, err, "lanes with several batches per shard would give up per-key order")
	assert.Contains(t, err.Error(), "shard_parallelism")
	assert.Contains(t, err.Error(), "shard_max_in_flight")

	cfg.ShardMaxInFlight = 1
	assert.NoError(t, cfg.Validate())
	cfg.ShardParallelism = 0
	assert.NoError(t, cfg.Validate(), "0 means one lane, so configurations built in code without the field keep working")
}

func TestConsumerWithLanesHandBackWaitsForEveryLanesBatch(t *testing.T) {
	api := consumertest.NewKinesis()
	const shard = "shardId-000000000000"
	api.Add(shard, &consumertest.KinesisShard{Records: 40, Keys: 8})
	st := consumertest.NewStore(time.Second)
	cfg := testConfig()
	cfg.ShardParallelism = 4
	cfg.Limit = 5
	cfg.HandoffTimeout = 10 * time.Second
	c, err := New(cfg, api, func(string) consumer.Store { return st }, nil, nil)
	require.NoError(t, err)
	require.NoError(t, c.Start(t.Context()))

	// Lanes have their batch in the pipeline, the first record's among
	// them (a lane still waiting to hand over when the stop comes may
	// never do: its records are the next owner's); none is acked yet.
	var held []*consumer.Batch
	delivered := map[int]bool{}
	timeout := time.After(10 * time.Second)
	for first := false; len(held) < 2 || !first; {
		select {
		case b := <-c.Batches():
			held = append(held, b)
			first = first || slices.ContainsFunc(b.Records, func(r consumer.Record) bool { return seqNum(t, r.Sequence) == 1 })
		case <-timeout:
			t.Fatal("fewer than two lanes delivered")
		}
	}
	closed := make(chan error, 1)
	go func() {
		ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
		defer cancel()
		closed <- c.Close(ctx)
	}()
	// A batch handed over just before the stop may still arrive.
	drain := time.After(300 * time.Millisecond)
	for done := false; !done; {
		select {
		case b := <-c.Batches():
			held = append(held, b)
		case <-drain:
			done = true
		}
	}
	for _, b := range held {
		for _, r := range b.Records {
			delivered[seqNum(t, r.Sequence)] = true
		}
		b.Ack(nil)
	}
	require.NoError(t, <-closed)

	n := 0
	for delivered[n+1] {
		n++
	}
	require.Positive(t, n)
	p, ok, _ := st.Checkpoint(t.Context(), shard)
	require.True(t, ok, "the hand-back committed")
	assert.Equal(t, consumertest.SeqOf(shard, n), p.Sequence, "the hand-back waited for the lanes' batches and committed all of them that are contiguous")
}
