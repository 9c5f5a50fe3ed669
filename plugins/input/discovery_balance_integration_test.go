package input

import (
	"fmt"
	"testing"
	"time"

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
