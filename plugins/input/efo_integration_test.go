package input

import (
	"context"
	"fmt"
	"math/big"
	"net/url"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/kinesis"
	"github.com/aws/aws-sdk-go-v2/service/kinesis/types"
	"github.com/redpanda-data/benthos/v4/public/service"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/connect-kinesis/connect-kinesis/internal/testenv"
)

// efoYAML turns enhanced fan-out on.
const efoYAML = `
  enhanced_fan_out:
    enabled: true
`

// perKey returns each key's payload counters in first-delivery order.
func perKey(ds []delivery) map[string][]int {
	seen := map[string]bool{}
	out := map[string][]int{}
	for _, d := range ds {
		if seen[d.data] {
			continue
		}
		seen[d.data] = true
		key, num, _ := strings.Cut(d.data, ":")
		n, _ := strconv.Atoi(num)
		out[key] = append(out[key], n)
	}
	return out
}

// splitAndMerge splits the stream's only open shard, writes, merges the
// two children back and writes again, so a reader meets both kinds of
// reshard.
func splitAndMerge(t *testing.T, emu *testenv.Kinesis, stream string, counters map[string]int, per int) {
	c := emu.Client()
	parent := openShards(t, c, stream)[0]
	mid := new(big.Int).Lsh(big.NewInt(1), 127)
	_, err := c.SplitShard(t.Context(), &kinesis.SplitShardInput{
		StreamName: aws.String(stream), ShardToSplit: aws.String(parent), NewStartingHashKey: aws.String(mid.String()),
	})
	require.NoError(t, err)
	_, err = emu.WaitActive(t.Context(), stream)
	require.NoError(t, err)
	writeRound(t, c, stream, counters, per)
	children := openShards(t, c, stream)
	require.Len(t, children, 2)
	_, err = c.MergeShards(t.Context(), &kinesis.MergeShardsInput{
		StreamName: aws.String(stream), ShardToMerge: aws.String(children[0]), AdjacentShardToMerge: aws.String(children[1]),
	})
	require.NoError(t, err)
	_, err = emu.WaitActive(t.Context(), stream)
	require.NoError(t, err)
	writeRound(t, c, stream, counters, per)
}

func total(counters map[string]int) int {
	n := 0
	for _, c := range counters {
		n += c
	}
	return n
}

// assertParentsFirst checks that no child shard's record was delivered
// before its parents' last record.
func assertParentsFirst(t *testing.T, c *kinesis.Client, stream string, ds []delivery) {
	t.Helper()
	first, last := map[string]int{}, map[string]int{}
	for i, d := range ds {
		if _, ok := first[d.shard]; !ok {
			first[d.shard] = i
		}
		last[d.shard] = i
	}
	out, err := c.ListShards(t.Context(), &kinesis.ListShardsInput{StreamName: aws.String(stream)})
	require.NoError(t, err)
	for _, s := range out.Shards {
		child := aws.ToString(s.ShardId)
		for _, p := range []string{aws.ToString(s.ParentShardId), aws.ToString(s.AdjacentParentShardId)} {
			if _, ok := first[child]; p == "" || !ok {
				continue
			}
			assert.Lessf(t, last[p], first[child], "child %s read before parent %s ended", child, p)
		}
	}
}

// Polling and enhanced fan-out read the same stream, through a split and
// a merge, as two applications: both deliver every record, each key's
// records in the order they were written, children after their parents.
func TestIntegrationEnhancedFanOutMatchesPolling(t *testing.T) {
	t.Parallel()
	emu := testenv.NewKinesisMock(t)
	red := testenv.NewRedis(t)
	const stream = "efo-vs-polling"
	arn := emu.MustCreateStream(t, stream, 1)
	c := emu.Client()
	counters := map[string]int{}

	polled, pushed := &collector{}, &collector{}
	var behindSeen atomic.Bool
	startStream(t, inputYAML(stream, emu.Endpoint, red.URL(), "polling", ""), func(_ context.Context, b service.MessageBatch) error {
		polled.add(b)
		return nil
	})
	startStream(t, inputYAML(stream, emu.TLSEndpoint, red.URL(), "fan-out", efoYAML), func(_ context.Context, b service.MessageBatch) error {
		for _, m := range b {
			if _, ok := m.MetaGet(MetaMillisBehind); ok {
				behindSeen.Store(true)
			}
		}
		pushed.add(b)
		return nil
	})

	writeRound(t, c, stream, counters, 20)
	splitAndMerge(t, emu, stream, counters, 20)
	want := total(counters)
	require.Eventually(t, func() bool { return polled.distinct() == want && pushed.distinct() == want },
		90*time.Second, 100*time.Millisecond, "polling %d, fan-out %d of %d", polled.distinct(), pushed.distinct(), want)

	p, f := perKey(polled.snapshot()), perKey(pushed.snapshot())
	for k, n := range counters {
		wantSeq := make([]int, n)
		for i := range wantSeq {
			wantSeq[i] = i
		}
		assert.Equalf(t, wantSeq, p[k], "polling order of key %s", k)
		assert.Equalf(t, wantSeq, f[k], "fan-out order of key %s", k)
	}
	assertParentsFirst(t, c, stream, pushed.snapshot())
	assert.True(t, behindSeen.Load(), "fan-out messages carry kinesis_millis_behind_latest")

	// The input registered the consumer under the group's name.
	d, err := c.DescribeStreamConsumer(t.Context(), &kinesis.DescribeStreamConsumerInput{StreamARN: aws.String(arn), ConsumerName: aws.String("fan-out")})
	require.NoError(t, err)
	assert.Equal(t, types.ConsumerStatusActive, d.ConsumerDescription.ConsumerStatus)
}

// Connections cut under live subscriptions, again and again while records
// are written, lose nothing: each subscription resumes after the last
// record delivered.
func TestIntegrationEnhancedFanOutCutSubscription(t *testing.T) {
	t.Parallel()
	emu := testenv.NewKinesisMock(t)
	red := testenv.NewRedis(t)
	const stream = "efo-cut"
	emu.MustCreateStream(t, stream, 2)
	c := emu.Client()

	u, err := url.Parse(emu.TLSEndpoint)
	require.NoError(t, err)
	proxy, err := testenv.StartTCPProxy(u.Host)
	require.NoError(t, err)
	t.Cleanup(proxy.Close)

	col := &collector{}
	startStream(t, inputYAML(stream, "https://"+proxy.Addr, red.URL(), "cut", efoYAML), func(_ context.Context, b service.MessageBatch) error {
		col.add(b)
		return nil
	})

	counters := map[string]int{}
	cut := 0
	for round := range 6 {
		writeRound(t, c, stream, counters, 10)
		// Wait until the round is being delivered, then cut under it. A cut
		// subscription can hold its shard until the emulator notices.
		require.Eventually(t, func() bool { return col.distinct() > round*200 }, testenv.SubscriptionHeldAtMost+time.Minute, 50*time.Millisecond,
			"round %d: delivered %d", round, col.distinct())
		cut += proxy.Cut()
	}
	want := total(counters)
	require.Eventually(t, func() bool { return col.distinct() == want }, testenv.SubscriptionHeldAtMost+time.Minute, 100*time.Millisecond,
		"delivered %d of %d", col.distinct(), want)
	assert.Positive(t, cut, "connections were cut")
	got := perKey(col.snapshot())
	for k, n := range counters {
		wantSeq := make([]int, n)
		for i := range wantSeq {
			wantSeq[i] = i
		}
		assert.Equalf(t, wantSeq, got[k], "order of key %s", k)
	}
	t.Logf("%d records through %d cut connections", want, cut)
}

func TestEnhancedFanOutConfig(t *testing.T) {
	base := func(efo string) string {
		return fmt.Sprintf(`
streams: [ s ]
checkpoint:
  redis: { url: "redis://127.0.0.1:6379" }
  group: orders
enhanced_fan_out:
%s`, efo)
	}
	for _, tc := range []struct {
		name, efo, wantErr, wantName string
	}{
		{name: "off by default", efo: "  consumer_name: \"\""},
		{name: "name defaults to the group", efo: "  enabled: true", wantName: "orders"},
		{name: "explicit name", efo: "  enabled: true\n  consumer_name: app-1", wantName: "app-1"},
		{name: "bad name", efo: "  enabled: true\n  consumer_name: 'a b'", wantErr: "field enhanced_fan_out.consumer_name"},
		{name: "name and arn", efo: "  enabled: true\n  consumer_name: x\n  consumer_arn: arn:aws:kinesis:us-east-1:1:stream/s/consumer/x:1", wantErr: "set one, not both"},
		{name: "not a consumer arn", efo: "  enabled: true\n  consumer_arn: arn:aws:kinesis:us-east-1:1:stream/s", wantErr: "field enhanced_fan_out.consumer_arn"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			conf, err := Spec().ParseYAML(base(tc.efo), nil)
			require.NoError(t, err)
			c, err := ConfigFromParsed(conf)
			if tc.wantErr != "" {
				require.Error(t, err)
				assert.Contains(t, err.Error(), tc.wantErr)
				return
			}
			require.NoError(t, err)
			assert.Equal(t, tc.wantName != "", c.Consumer.EnhancedFanOut.Enabled)
			assert.Equal(t, tc.wantName, c.Consumer.EnhancedFanOut.ConsumerName)
		})
	}
}
