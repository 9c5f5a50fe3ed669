package input

import (
	"context"
	"math/big"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/kinesis"
	"github.com/aws/aws-sdk-go-v2/service/kinesis/types"
	"github.com/redis/go-redis/v9"
	"github.com/redpanda-data/benthos/v4/public/service"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/connect-kinesis/connect-kinesis/internal/faultproxy"
	"github.com/connect-kinesis/connect-kinesis/internal/testenv"
)

// largestRedisKey is the most entries any one key of Redis holds (fields
// of a hash, members of a set or sorted set), and that key.
func largestRedisKey(t *testing.T, rc *redis.Client) (string, int64) {
	ctx := t.Context()
	keys, err := rc.Keys(ctx, "*").Result()
	require.NoError(t, err)
	var top string
	var most int64
	for _, k := range keys {
		typ, err := rc.Type(ctx, k).Result()
		require.NoError(t, err)
		var n int64
		switch typ {
		case "hash":
			n, err = rc.HLen(ctx, k).Result()
		case "set":
			n, err = rc.SCard(ctx, k).Result()
		case "zset":
			n, err = rc.ZCard(ctx, k).Result()
		}
		require.NoError(t, err)
		if n > most {
			top, most = k, n
		}
	}
	return top, most
}

// allShards lists every shard of the stream, over every page.
func allShards(t *testing.T, c *kinesis.Client, stream string) []types.Shard {
	var shards []types.Shard
	in := &kinesis.ListShardsInput{StreamName: aws.String(stream)}
	for {
		out, err := c.ListShards(t.Context(), in)
		require.NoError(t, err)
		shards = append(shards, out.Shards...)
		if out.NextToken == nil {
			return shards
		}
		in = &kinesis.ListShardsInput{NextToken: out.NextToken}
	}
}

// openOf lists the shards without an ending sequence number.
func openOf(shards []types.Shard) []string {
	var open []string
	for _, s := range shards {
		if s.SequenceNumberRange.EndingSequenceNumber == nil {
			open = append(open, aws.ToString(s.ShardId))
		}
	}
	return open
}

// trimmable lists the closed shards whose children are all closed too: a
// real stream trims them past the retention period once read.
func trimmable(t *testing.T, c *kinesis.Client, stream string) []string {
	closed := map[string]bool{}
	children := map[string][]string{}
	for _, s := range allShards(t, c, stream) {
		id := aws.ToString(s.ShardId)
		closed[id] = s.SequenceNumberRange.EndingSequenceNumber != nil
		for _, p := range []string{aws.ToString(s.ParentShardId), aws.ToString(s.AdjacentParentShardId)} {
			if p != "" {
				children[p] = append(children[p], id)
			}
		}
	}
	var out2 []string
	for id, isClosed := range closed {
		ok := isClosed && len(children[id]) > 0
		for _, ch := range children[id] {
			ok = ok && closed[ch]
		}
		if ok {
			out2 = append(out2, id)
		}
	}
	return out2
}

// After 100 reshards (splits and merges in turn, about 150 shards), with
// each shard hidden as trimmed once it and its children are read and
// closed, no Redis key holds more than a few shards' entries: the
// checkpoints, leases, closed marks and progress of trimmed shards are
// pruned, and every record is delivered.
func TestIntegrationPruneKeepsRedisBoundedOverAHundredReshards(t *testing.T) {
	t.Parallel()
	emu := testenv.NewKinesisMock(t)
	red := testenv.NewRedis(t)
	const stream = "pruned"
	emu.MustCreateStream(t, stream, 1)
	p, err := faultproxy.Start(emu.Endpoint, 7)
	require.NoError(t, err)
	t.Cleanup(func() { _ = p.Close() })
	opts, err := redis.ParseURL(red.URL())
	require.NoError(t, err)
	rc := redis.NewClient(opts)
	t.Cleanup(func() { _ = rc.Close() })
	c := emu.Client()

	col := &collector{}
	rs := startStream(t, inputYAML(stream, p.URL, red.URL(), "g", ""), func(_ context.Context, b service.MessageBatch) error {
		col.add(b)
		return nil
	})
	counters := map[string]int{}
	total := func() int {
		n := 0
		for _, v := range counters {
			n += v
		}
		return n
	}
	delivered := func() {
		require.Eventually(t, func() bool { return col.distinct() == total() }, 60*time.Second, 50*time.Millisecond,
			"records delivered: %d of %d", col.distinct(), total())
	}
	const reshards = 100
	var most int64
	var mostKey string
	var series []int64
	mid := new(big.Int).Lsh(big.NewInt(1), 127)
	for i := range reshards {
		writeRound(t, c, stream, counters, 1)
		open := openOf(allShards(t, c, stream))
		if len(open) == 1 {
			_, err = c.SplitShard(t.Context(), &kinesis.SplitShardInput{
				StreamName: aws.String(stream), ShardToSplit: aws.String(open[0]), NewStartingHashKey: aws.String(mid.String()),
			})
		} else {
			_, err = c.MergeShards(t.Context(), &kinesis.MergeShardsInput{
				StreamName: aws.String(stream), ShardToMerge: aws.String(open[0]), AdjacentShardToMerge: aws.String(open[1]),
			})
		}
		require.NoError(t, err, "reshard %d", i)
		_, err = emu.WaitActive(t.Context(), stream)
		require.NoError(t, err)
		if i%10 == 9 {
			// Trimmed only once read: retention trims what was read long ago.
			delivered()
			p.HideShards(trimmable(t, c, stream)...)
			k, n := largestRedisKey(t, rc)
			series = append(series, n)
			if n > most {
				most, mostKey = n, k
			}
		}
		if i%30 == 29 {
			// Every 30 reshards the prune must catch up within its grace
			// (two lease periods, 6 s) plus a listing: how many entries a
			// check right after a hiding sees depends only on how fast the
			// emulator reshards (up to 122 of 151 on a quiet machine).
			assert.Eventually(t, func() bool {
				_, n := largestRedisKey(t, rc)
				return n <= 6
			}, 30*time.Second, 200*time.Millisecond, "entries of trimmed shards left in Redis after %d reshards", i+1)
		}
	}
	writeRound(t, c, stream, counters, 1)
	delivered()
	p.HideShards(trimmable(t, c, stream)...)
	ever := len(allShards(t, c, stream))
	assert.Eventually(t, func() bool {
		_, n := largestRedisKey(t, rc)
		return n <= 6
	}, 30*time.Second, 200*time.Millisecond, "entries of trimmed shards left in Redis")
	k, n := largestRedisKey(t, rc)
	t.Logf("%d shards ever; the largest Redis key held at most %d entries (%s) at the checks every 10 reshards (%v), %d (%s) at the end",
		ever, most, mostKey, series, n, k)
	rs.stop(t)
}
