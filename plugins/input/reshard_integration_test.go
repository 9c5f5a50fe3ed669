package input

import (
	"context"
	"fmt"
	"math/big"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/kinesis"
	"github.com/redpanda-data/benthos/v4/public/service"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/connect-kinesis/connect-kinesis/internal/testenv"
)

// writeRound writes `per` records for each key k0..k19, continuing each
// key's counter.
func writeRound(t *testing.T, c *kinesis.Client, stream string, counters map[string]int, per int) {
	var keys, payloads []string
	for range per {
		for k := range 20 {
			key := fmt.Sprintf("k%d", k)
			keys = append(keys, key)
			payloads = append(payloads, fmt.Sprintf("%s:%d", key, counters[key]))
			counters[key]++
		}
	}
	putRecords(t, c, stream, keys, payloads)
}

func openShards(t *testing.T, c *kinesis.Client, stream string) []string {
	out, err := c.ListShards(t.Context(), &kinesis.ListShardsInput{StreamName: aws.String(stream)})
	require.NoError(t, err)
	var open []string
	for _, s := range out.Shards {
		if s.SequenceNumberRange.EndingSequenceNumber == nil {
			open = append(open, aws.ToString(s.ShardId))
		}
	}
	return open
}

func TestIntegrationReshardKeepsPerKeyOrder(t *testing.T) {
	t.Parallel()
	emu := testenv.NewKinesisMock(t)
	red := testenv.NewRedis(t)
	const stream = "reshard"
	emu.MustCreateStream(t, stream, 1)
	c := emu.Client()
	counters := map[string]int{}

	col := &collector{}
	rs := startStream(t, inputYAML(stream, emu.Endpoint, red.URL(), "g", ""), func(_ context.Context, b service.MessageBatch) error {
		col.add(b)
		return nil
	})

	writeRound(t, c, stream, counters, 25)
	parent := openShards(t, c, stream)[0]
	mid := new(big.Int).Lsh(big.NewInt(1), 127)
	_, err := c.SplitShard(t.Context(), &kinesis.SplitShardInput{
		StreamName: aws.String(stream), ShardToSplit: aws.String(parent), NewStartingHashKey: aws.String(mid.String()),
	})
	require.NoError(t, err)
	_, err = emu.WaitActive(t.Context(), stream)
	require.NoError(t, err)
	writeRound(t, c, stream, counters, 25)
	children := openShards(t, c, stream)
	require.Len(t, children, 2)
	_, err = c.MergeShards(t.Context(), &kinesis.MergeShardsInput{
		StreamName: aws.String(stream), ShardToMerge: aws.String(children[0]), AdjacentShardToMerge: aws.String(children[1]),
	})
	require.NoError(t, err)
	_, err = emu.WaitActive(t.Context(), stream)
	require.NoError(t, err)
	writeRound(t, c, stream, counters, 25)

	total := 0
	for _, n := range counters {
		total += n
	}
	require.Eventually(t, func() bool { return col.distinct() == total }, 60*time.Second, 100*time.Millisecond)
	rs.stop(t)

	// Every key's counter strictly increases over first deliveries.
	ds := col.snapshot()
	next := map[string]int{}
	seen := map[string]bool{}
	firstIdx := map[string]int{} // shard -> index of its first delivery
	lastIdx := map[string]int{}  // shard -> index of its last delivery
	for i, d := range ds {
		if _, ok := firstIdx[d.shard]; !ok {
			firstIdx[d.shard] = i
		}
		lastIdx[d.shard] = i
		if seen[d.data] {
			continue
		}
		seen[d.data] = true
		key, num, _ := strings.Cut(d.data, ":")
		n, _ := strconv.Atoi(num)
		assert.Equalf(t, next[key], n, "key %s: got counter %d, want %d", key, n, next[key])
		next[key] = n + 1
	}
	for k, n := range counters {
		assert.Equal(t, n, next[k], "key %s fully delivered", k)
	}

	// No child record was delivered before its parents' last record.
	out, err := c.ListShards(t.Context(), &kinesis.ListShardsInput{StreamName: aws.String(stream)})
	require.NoError(t, err)
	require.Len(t, out.Shards, 4)
	for _, s := range out.Shards {
		child := aws.ToString(s.ShardId)
		for _, p := range []string{aws.ToString(s.ParentShardId), aws.ToString(s.AdjacentParentShardId)} {
			if p == "" {
				continue
			}
			if _, ok := firstIdx[child]; !ok {
				continue
			}
			assert.Lessf(t, lastIdx[p], firstIdx[child], "child %s read before parent %s ended", child, p)
		}
	}
}
