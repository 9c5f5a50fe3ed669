package checkpointer

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/connect-kinesis/connect-kinesis/internal/consumer"
	"github.com/connect-kinesis/connect-kinesis/internal/streams"
	"github.com/connect-kinesis/connect-kinesis/internal/testenv"
)

// TestIntegrationDiscoveryFollowsStreams: over successive listings, the
// group's result tells streams of its first listing from streams that
// appeared later or were created again, marks a stream that left as gone,
// and once it has been gone for the retention deletes its keys, but not
// while an instance still holds one of its leases.
func TestIntegrationDiscoveryFollowsStreams(t *testing.T) {
	t.Parallel()
	r := testenv.NewRedis(t)
	c := newTestCheckpointer(t, backend{url: r.URL(), kind: KindSimple}, t.Name(), func(c *Config) { c.LeasePeriod = 30 * time.Second })
	ctx := t.Context()
	const (
		interval  = 300 * time.Millisecond
		retention = 600 * time.Millisecond
	)
	// round lists once: it waits for the claim that an interval allows.
	round := func(found ...streams.Identity) (Discovery, DiscoveryRound) {
		t.Helper()
		for {
			d, rd, err := c.DiscoverStreams(ctx, "a", interval, retention, func(context.Context) ([]streams.Identity, error) { return found, nil })
			require.NoError(t, err)
			if rd.Listed {
				return d, rd
			}
			time.Sleep(20 * time.Millisecond)
		}
	}
	byName := func(d Discovery) map[string]DiscoveredStream {
		out := map[string]DiscoveredStream{}
		for _, s := range d.Streams {
			out[s.Name] = s
		}
		return out
	}

	d, _ := round(ident("t-1", 1000), ident("t-2", 1000))
	first := byName(d)
	assert.False(t, first["t-1"].Appeared, "streams of the first listing start at start_position")
	assert.False(t, first["t-2"].Appeared)

	// t-2's state: a live lease (30 s) and a checkpoint.
	s2 := c.Stream(arnOf("t-2"))
	_, err := s2.Join(ctx)
	require.NoError(t, err)
	tk, err := s2.Acquire(ctx, "shardId-0", "b")
	require.NoError(t, err)
	require.NoError(t, s2.Commit(ctx, tk.Lease, consumer.Position{Sequence: "5"}))

	d, _ = round(ident("t-1", 1000), ident("t-3", 5000))
	now := byName(d)
	assert.True(t, now["t-3"].Appeared, "a stream found later starts at new_stream_start_position")
	assert.False(t, now["t-2"].Gone.IsZero(), "t-2 left the listing")
	assert.Equal(t, first["t-1"].Seen, now["t-1"].Seen)
	assert.Len(t, d.Listed(), 2)

	// Past the retention, t-2's lease still live: its keys stay.
	time.Sleep(retention)
	_, rd := round(ident("t-1", 1000), ident("t-3", 5000))
	assert.Equal(t, []string{arnOf("t-2")}, rd.Kept, "a live lease keeps the keys")
	n, err := c.Client().Exists(ctx, s2.Keys().Checkpoints).Result()
	require.NoError(t, err)
	assert.EqualValues(t, 1, n)

	require.NoError(t, s2.Release(ctx, tk.Lease))
	require.NoError(t, s2.RemoveMember(ctx, "b"))
	d, rd = round(ident("t-1", 1000), ident("t-3", 5000))
	assert.Equal(t, []string{arnOf("t-2")}, rd.Pruned)
	k := s2.Keys()
	n, err = c.Client().Exists(ctx, k.Checkpoints, k.Closed, k.Leases, k.Members, k.Handoff, k.Progress, k.Epoch).Result()
	require.NoError(t, err)
	assert.Zero(t, n, "every key of the released stream is gone")
	assert.NotContains(t, byName(d), "t-2")

	// t-1 created again: a new incarnation, found anew.
	d, _ = round(ident("t-1", 9000), ident("t-3", 5000))
	again := byName(d)["t-1"]
	assert.True(t, again.Appeared, "a stream created again is a new stream")
	assert.Equal(t, time.UnixMilli(9000), again.Created)
	assert.True(t, again.Seen.After(first["t-1"].Seen))
}

// TestIntegrationACLInputUserRunsDiscovery runs every discovery path
// (claim, publish, read, a refused and a done prune, forget) as the
// input's shipped ACL user: Redis must refuse nothing.
func TestIntegrationACLInputUserRunsDiscovery(t *testing.T) {
	t.Parallel()
	r := testenv.NewRedis(t, testenv.RedisOptions{ShippedACL: true})
	cfg := testConfig(backend{url: r.URLAs(testenv.ACLInput), kind: KindSimple}, "orders")
	cfg.LeasePeriod = 30 * time.Second
	c, err := New(t.Context(), cfg, nil, nil)
	require.NoError(t, err)
	t.Cleanup(func() { _ = c.Close() })
	ctx := t.Context()
	s := c.Stream(arnOf("gone"))
	_, err = s.Join(ctx)
	require.NoError(t, err)
	tk, err := s.Acquire(ctx, "shardId-0", "b")
	require.NoError(t, err)
	// Listed, then gone (marked), then past the retention of 0 with its
	// lease live (kept), then released (pruned).
	lists := [][]streams.Identity{{ident("gone", 1)}, nil, nil, nil}
	var rounds []DiscoveryRound
	for _, found := range lists {
		for {
			_, rd, err := c.DiscoverStreams(ctx, "a", 100*time.Millisecond, 0, func(context.Context) ([]streams.Identity, error) { return found, nil })
			require.NoError(t, err)
			if rd.Listed {
				rounds = append(rounds, rd)
				break
			}
			time.Sleep(20 * time.Millisecond)
		}
		if len(rounds) == 3 {
			require.NoError(t, s.Release(ctx, tk.Lease))
			require.NoError(t, s.RemoveMember(ctx, "b"))
		}
	}
	assert.Equal(t, []string{arnOf("gone")}, rounds[2].Kept)
	assert.Equal(t, []string{arnOf("gone")}, rounds[3].Pruned)
	assertNoACLDenials(t, r)
}
