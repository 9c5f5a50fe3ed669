package input

import (
	"context"
	"fmt"
	"maps"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/kinesis"
	"github.com/aws/aws-sdk-go-v2/service/kinesis/types"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/connect-kinesis/connect-kinesis/internal/testenv"
	"github.com/connect-kinesis/connect-kinesis/plugins/checkpointer"
)

// Six one-shard streams of a pattern, read by one instance, then a second
// joins while records flow (lease.balance: load, the default): the shards
// are shared three and three across the streams, and nothing is read twice
// at the hand-offs. Balanced stream by stream, each stream's share is its
// one shard, which the first instance already holds, and the second would
// read nothing.
func TestIntegrationStreamsAreBalancedAcrossInstances(t *testing.T) {
	t.Parallel()
	emu := testenv.SharedKinesisMock(t)
	red := testenv.NewRedis(t)
	client := emu.Client()
	p := uniquePrefix("tbal")
	const streams = 6
	arns := map[string]string{}
	for i := range streams {
		name := fmt.Sprintf("%s%d", p, i)
		arns[name] = emu.MustCreateStream(t, name, 1)
	}
	cfg := checkpointer.DefaultConfig()
	cfg.RedisURL, cfg.Group = red.URL(), "g"
	ck, err := checkpointer.New(t.Context(), cfg, nil, nil)
	require.NoError(t, err)
	defer ck.Close()
	held := func() map[string]int {
		out := map[string]int{}
		for _, arn := range arns {
			ls, err := ck.Stream(arn).Leases(t.Context())
			require.NoError(t, err)
			for _, l := range ls {
				if l.Owner != "" && !l.Expired {
					out[l.Owner]++
				}
			}
		}
		return out
	}

	const interval = 5 * time.Second
	col := &streamCollector{}
	startFollowing(t, followingYAML(p+"*", emu.Endpoint, red.URL(), "a", interval, ""), col, &lockedBuffer{})
	require.Eventually(t, func() bool { return held()["a"] == streams }, 2*interval+20*time.Second, 200*time.Millisecond, "the first instance takes every stream")

	wave := 0
	write := func() {
		for name := range arns {
			putKeyed(t, client, name, fmt.Sprintf("w%d-", wave), 10)
		}
		wave++
	}
	write()
	startFollowing(t, followingYAML(p+"*", emu.Endpoint, red.URL(), "b", interval, ""), col, &lockedBuffer{})
	joined := time.Now()
	require.EventuallyWithT(t, func(c *assert.CollectT) {
		write()
		assert.Equal(c, map[string]int{"a": streams / 2, "b": streams / 2}, held(), "shards by instance")
	}, 2*interval+60*time.Second, time.Second)
	t.Logf("3 and 3 shards %v after the second instance started", time.Since(joined).Round(100*time.Millisecond))

	require.Eventually(t, func() bool {
		for name := range arns {
			if n, _ := col.count(name, "w"); n < wave*10 {
				return false
			}
		}
		return true
	}, 30*time.Second, 200*time.Millisecond, "every record written is read")
	for name := range arns {
		n, dup := col.count(name, "w")
		assert.Equal(t, wave*10, n, "deliveries of %s", name)
		assert.Zero(t, dup, "records of %s read twice at a hand-off", name)
	}
}

// By load (the default), a steady uneven load over one-shard streams of a
// pattern ends within the balancing band and stays there: 8 streams
// written at 10, 2, 2, 2, 1, 1, 1 and 1 units (20 in all; a unit is ten
// 500-byte records a second), read by one instance, then a second joins.
// Each instance's load, counted in the units written, ends between 8 and
// 12.5 (the fair 10 divided and multiplied by 1.25), and no shard changes
// hands for 10 s. Split by count, 4 and 4 shards, whoever holds the hot
// stream reads at least 13 units (it fails so with lease.balance: count).
func TestIntegrationStreamsEvenOutByASteadyUnevenLoad(t *testing.T) {
	t.Parallel()
	emu := testenv.NewKinesalite(t)
	red := testenv.NewRedis(t)
	client := emu.Client()
	p := uniquePrefix("tload")
	weights := []int{10, 2, 2, 2, 1, 1, 1, 1}
	arns := map[string]string{}
	units := map[string]int{}
	for i, w := range weights {
		name := fmt.Sprintf("%s%d", p, i)
		arns[name] = emu.MustCreateStream(t, name, 1)
		units[arns[name]] = w
	}
	cfg := checkpointer.DefaultConfig()
	cfg.RedisURL, cfg.Group = red.URL(), "g"
	ck, err := checkpointer.New(t.Context(), cfg, nil, nil)
	require.NoError(t, err)
	defer ck.Close()
	// loadBy is each owner's units, and the owner of every stream's shard
	// by stream ARN ("" while it is between owners).
	loadBy := func() (map[string]int, map[string]string) {
		out, owner := map[string]int{}, map[string]string{}
		for _, arn := range arns {
			ls, err := ck.Stream(arn).Leases(t.Context())
			require.NoError(t, err)
			for _, l := range ls {
				if l.Owner != "" && !l.Expired {
					out[l.Owner] += units[arn]
					owner[arn] = l.Owner
				}
			}
		}
		return out, owner
	}

	ctx, cancel := context.WithCancel(t.Context())
	var wg sync.WaitGroup
	defer wg.Wait()
	defer cancel()
	data := []byte(strings.Repeat("x", 500))
	wg.Go(func() {
		tick := time.NewTicker(100 * time.Millisecond)
		defer tick.Stop()
		for ctx.Err() == nil {
			for i, w := range weights {
				entries := make([]types.PutRecordsRequestEntry, w)
				for j := range entries {
					entries[j] = types.PutRecordsRequestEntry{PartitionKey: aws.String(fmt.Sprintf("k%d", j)), Data: data}
				}
				if _, err := client.PutRecords(ctx, &kinesis.PutRecordsInput{StreamName: aws.String(fmt.Sprintf("%s%d", p, i)), Records: entries}); err != nil && ctx.Err() == nil {
					t.Errorf("writing records: %v", err)
					return
				}
			}
			select {
			case <-ctx.Done():
			case <-tick.C:
			}
		}
	})

	const interval = 5 * time.Second
	col := &streamCollector{}
	startFollowing(t, followingYAML(p+"*", emu.Endpoint, red.URL(), "a", interval, ""), col, &lockedBuffer{})
	require.Eventually(t, func() bool { l, _ := loadBy(); return l["a"] == 20 }, 2*interval+20*time.Second, 200*time.Millisecond, "the first instance takes every stream")
	startFollowing(t, followingYAML(p+"*", emu.Endpoint, red.URL(), "b", interval, ""), col, &lockedBuffer{})
	joined := time.Now()
	// Settled: within the band, and no shard changed hands for 10 s.
	var last map[string]int
	var owners map[string]string
	since := time.Now()
	settled := assert.Eventually(t, func() bool {
		l, o := loadBy()
		if !maps.Equal(o, owners) {
			owners, since = o, time.Now()
			t.Logf("%v after the second instance started: loads in units %v", since.Sub(joined).Round(100*time.Millisecond), l)
		}
		last = l
		return l["a"]+l["b"] == 20 && l["a"] >= 8 && l["b"] >= 8 && time.Since(since) >= 10*time.Second
	}, 120*time.Second, 250*time.Millisecond, "each instance's load within 8 to 12.5 units of 20, and no shard moving for 10 s")
	if !settled {
		// What the members balance on: the bytes/s each owner last
		// published, by stream (index in weights) and owner.
		for i := range weights {
			arn := arns[fmt.Sprintf("%s%d", p, i)]
			published, err := ck.Stream(arn).ShardLoads(t.Context())
			require.NoError(t, err)
			t.Logf("stream %d (%d units), held by %q: published %v", i, weights[i], owners[arn], published)
		}
		t.Fatalf("last seen: loads in units %v, owners %v", last, owners)
	}
	t.Logf("loads in units %v, settled %v after the second instance started", last, since.Sub(joined).Round(100*time.Millisecond))
}
