package kinesissim

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/kinesis"
	"github.com/aws/aws-sdk-go-v2/service/kinesis/types"
	_ "github.com/redpanda-data/benthos/v4/public/components/pure"
	"github.com/redpanda-data/benthos/v4/public/service"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/connect-kinesis/connect-kinesis/internal/consumer"
	"github.com/connect-kinesis/connect-kinesis/internal/testenv"
	"github.com/connect-kinesis/connect-kinesis/plugins/input"
)

// TestIntegrationInputReadsKeyedLoadOnceInKeyOrder guards a simulator the
// connector cannot read correctly: the real kinesis input, with its Redis
// checkpointer, reads a keyed load written through the simulator (half
// before it starts, half while it reads) and must deliver every record
// exactly once, each key's records in the order they were written, each
// shard's in sequence order.
func TestIntegrationInputReadsKeyedLoadOnceInKeyOrder(t *testing.T) {
	t.Parallel()
	const (
		shards  = 8
		keys    = 64
		perKey  = 50
		records = keys * perKey
	)
	s, c := start(t)
	rd := testenv.NewRedis(t)
	require.NoError(t, s.CreateStream("load", shards))

	// Record n of key k is "k<k>:<n>"; a request holds at most one
	// record per key, so each key's records are written in order.
	putRound := func(from, to int) {
		for n := from; n < to; n++ {
			var entries []types.PutRecordsRequestEntry
			for k := range keys {
				entries = append(entries, types.PutRecordsRequestEntry{
					PartitionKey: aws.String("k" + strconv.Itoa(k)),
					Data:         fmt.Appendf(nil, "k%d:%d", k, n),
				})
			}
			out, err := c.PutRecords(t.Context(), &kinesis.PutRecordsInput{StreamName: aws.String("load"), Records: entries})
			require.NoError(t, err)
			require.Zero(t, aws.ToInt32(out.FailedRecordCount))
		}
	}
	putRound(0, perKey/2)

	var (
		mu  sync.Mutex
		got []delivered
	)
	sb := service.NewStreamBuilder()
	require.NoError(t, sb.SetLoggerYAML("level: warn"))
	require.NoError(t, sb.AddInputYAML(fmt.Sprintf(`
kinesis:
  streams: [ load ]
  region: %s
  endpoint: %s
  credentials:
    id: %s
    secret: %s
  checkpoint:
    redis:
      url: %s
    group: sim
    commit_period: 200ms
  lease:
    period: 3s
    rebalance_period: 300ms
    handoff_timeout: 5s
  poll_interval: 200ms
  idle_poll_interval: 200ms
  shard_discovery_interval: 1s
`, testenv.Region, s.Endpoint(), testenv.AccessKey, testenv.SecretKey, rd.URL())))
	require.NoError(t, sb.AddBatchConsumerFunc(func(_ context.Context, b service.MessageBatch) error {
		mu.Lock()
		defer mu.Unlock()
		for _, m := range b {
			shard, _ := m.MetaGet(input.MetaShard)
			seq, _ := m.MetaGet(input.MetaSequenceNumber)
			data, err := m.AsBytes()
			if err != nil {
				return err
			}
			got = append(got, delivered{shard: shard, seq: seq, data: string(data)})
		}
		return nil
	}))
	stream, err := sb.Build()
	require.NoError(t, err)
	done := make(chan error, 1)
	go func() { done <- stream.Run(context.WithoutCancel(t.Context())) }()
	stopped := false
	stop := func() {
		if stopped {
			return
		}
		stopped = true
		ctx, cancel := context.WithTimeout(context.WithoutCancel(t.Context()), 20*time.Second)
		defer cancel()
		assert.NoError(t, stream.Stop(ctx))
		<-done
	}
	t.Cleanup(stop)

	putRound(perKey/2, perKey)
	count := func() int {
		mu.Lock()
		defer mu.Unlock()
		return len(got)
	}
	require.Eventually(t, func() bool { return count() >= records }, 60*time.Second, 100*time.Millisecond,
		"records delivered: %d of %d", count(), records)
	// Anything delivered twice shows within a few polls and commits.
	time.Sleep(time.Second)
	stop()

	mu.Lock()
	defer mu.Unlock()
	assert.Len(t, got, records, "every record exactly once")
	next := map[string]int{}
	lastSeq := map[string]consumer.Position{}
	for _, d := range got {
		key, n, ok := strings.Cut(d.data, ":")
		require.True(t, ok, d.data)
		i, err := strconv.Atoi(n)
		require.NoError(t, err)
		assert.Equal(t, next[key], i, "key %s: record %d delivered when %d was next", key, i, next[key])
		next[key] = i + 1
		pos := consumer.Position{Sequence: d.seq}
		if prev, ok := lastSeq[d.shard]; ok {
			assert.Equal(t, 1, pos.Compare(prev), "shard %s delivered %s after %s", d.shard, d.seq, prev.Sequence)
		}
		lastSeq[d.shard] = pos
	}
	assert.Len(t, next, keys)
	assert.Len(t, lastSeq, shards, "every shard read")
	calls := s.Calls()
	t.Logf("calls served: %v", calls)
	assert.Positive(t, calls["GetRecords"])
	assert.Positive(t, calls["GetShardIterator"])
}

type delivered struct{ shard, seq, data string }
