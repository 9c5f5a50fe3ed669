package input

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"strings"
	"sync"
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
	"github.com/connect-kinesis/connect-kinesis/plugins/checkpointer"
)

// writeHot writes to every shard of stream until ctx ends: every 100 ms
// ten 500-byte records to each hot shard and one to each other shard, by
// explicit hash key, so the hot shards carry 10× the others' bytes/s.
func writeHot(ctx context.Context, t *testing.T, c *kinesis.Client, stream string, shards []types.Shard, hot map[string]bool) {
	data := []byte(strings.Repeat("x", 500))
	tick := time.NewTicker(100 * time.Millisecond)
	defer tick.Stop()
	for {
		var entries []types.PutRecordsRequestEntry
		for _, s := range shards {
			n := 1
			if hot[aws.ToString(s.ShardId)] {
				n = 10
			}
			for range n {
				entries = append(entries, types.PutRecordsRequestEntry{PartitionKey: aws.String("k"), ExplicitHashKey: s.HashKeyRange.StartingHashKey, Data: data})
			}
		}
		if _, err := c.PutRecords(ctx, &kinesis.PutRecordsInput{StreamName: aws.String(stream), Records: entries}); err != nil && ctx.Err() == nil {
			t.Errorf("writing records: %v", err)
			return
		}
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		}
	}
}

// Two instances on 8 shards of which 2 carry 10× the others' bytes/s: with
// lease.balance: load (the default) each ends with one hot shard, their
// published bytes/s within 1.5× of each other, and the shards then stay
// put. The second instance joins while the first reads all 8 shards, so
// where the hot shards end up is balancing's doing.
func TestIntegrationBalancingByLoadSplitsHotShards(t *testing.T) {
	t.Parallel()
	emu := testenv.NewKinesalite(t)
	red := testenv.NewRedis(t)
	const stream = "hot-shards"
	arn := emu.MustCreateStream(t, stream, 8)
	cfg := checkpointer.DefaultConfig()
	cfg.RedisURL, cfg.Group = red.URL(), "g"
	ck, err := checkpointer.New(t.Context(), cfg, nil, nil)
	require.NoError(t, err)
	defer ck.Close()
	st := ck.Stream(arn)

	listed, err := emu.Client().ListShards(t.Context(), &kinesis.ListShardsInput{StreamName: aws.String(stream)})
	require.NoError(t, err)
	require.Len(t, listed.Shards, 8)
	hot := map[string]bool{aws.ToString(listed.Shards[0].ShardId): true, aws.ToString(listed.Shards[5].ShardId): true}
	ctx, cancel := context.WithCancel(t.Context())
	var wg sync.WaitGroup
	wg.Go(func() { writeHot(ctx, t, emu.Client(), stream, listed.Shards, hot) })
	defer wg.Wait()
	defer cancel()

	var delivered atomic.Int64
	discard := func(_ context.Context, b service.MessageBatch) error { delivered.Add(int64(len(b))); return nil }
	began := time.Now()
	yaml := inputYAML(stream, emu.Endpoint, red.URL(), "g", "")
	a := startStream(t, yaml, discard)
	defer a.stop(t)
	require.Eventually(t, func() bool {
		loads, err := st.ShardLoads(t.Context())
		require.NoError(t, err)
		o := owners(t, st)
		return len(o) == 1 && o[firstKey(o)] == 8 && len(loads) == 8 && loads[firstHot(hot)].BytesPerSecond > 0
	}, 30*time.Second, 100*time.Millisecond, "the first instance reads all 8 shards and publishes their loads")

	b := startStream(t, yaml, discard)
	defer b.stop(t)
	// split reports whether each instance holds one hot shard and their
	// published bytes/s are within 1.5×, with what it saw.
	split := func() (bool, string) {
		ls, err := st.Leases(t.Context())
		require.NoError(t, err)
		loads, err := st.ShardLoads(t.Context())
		require.NoError(t, err)
		hotBy, bytesBy := map[string]int{}, map[string]int64{}
		for id, l := range ls {
			if l.Expired || l.Owner == "" {
				return false, "shard " + id + " is between owners"
			}
			bytesBy[l.Owner] += loads[id].BytesPerSecond
			if hot[id] {
				hotBy[l.Owner]++
			}
		}
		seen := describeSplit(hotBy, bytesBy)
		if len(ls) != 8 || len(hotBy) != 2 || len(bytesBy) != 2 {
			return false, seen
		}
		b := slices.Collect(maps.Values(bytesBy))
		return float64(max(b[0], b[1])) <= 1.5*float64(min(b[0], b[1])), seen
	}
	var last string
	if !assert.Eventually(t, func() bool {
		ok, seen := split()
		last = seen
		return ok
	}, 45*time.Second, 200*time.Millisecond, "each instance ends with one hot shard") {
		t.Fatalf("last seen: %s", last)
	}
	t.Logf("balanced: %s", last)
	if loads, err := st.ShardLoads(t.Context()); err == nil {
		t.Logf("loads: %v; delivered %d records in %v", loads, delivered.Load(), time.Since(began))
	}
	// Stays put: the hot shards keep their owners for ten rebalance
	// periods and more (a bounce would hand one back).
	holders := hotHolders(t, st, hot)
	assert.Never(t, func() bool { return !slices.Equal(hotHolders(t, st, hot), holders) }, 5*time.Second, 200*time.Millisecond,
		"hot shards stay with %v", holders)
}

func firstHot(hot map[string]bool) string {
	return slices.Sorted(maps.Keys(hot))[0]
}

// hotHolders lists the owners of the hot shards, by shard id.
func hotHolders(t *testing.T, st *checkpointer.Store, hot map[string]bool) []string {
	ls, err := st.Leases(t.Context())
	require.NoError(t, err)
	var out []string
	for _, id := range slices.Sorted(maps.Keys(hot)) {
		out = append(out, ls[id].Owner)
	}
	return out
}

func describeSplit(hotBy map[string]int, bytesBy map[string]int64) string {
	var b strings.Builder
	for _, o := range slices.Sorted(maps.Keys(bytesBy)) {
		fmt.Fprintf(&b, "%s: %d hot, %d B/s; ", o, hotBy[o], bytesBy[o])
	}
	return b.String()
}
