package checkpointer

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/connect-kinesis/connect-kinesis/internal/streams"
	"github.com/connect-kinesis/connect-kinesis/internal/testenv"
)

// TestIntegrationDiscoveryReseededAfterFlush: Redis forgets the group's
// discovery hash (FLUSHALL); the next listing, published with what the
// lister last read, keeps the group's first listing time and each known
// stream's seen time and flag, and a stream it did not know counts as
// appeared (new_stream_start_position). Without the seed the listing after
// the wipe counted as the group's first and the new stream did not appear.
func TestIntegrationDiscoveryReseededAfterFlush(t *testing.T) {
	t.Parallel()
	r := testenv.NewRedis(t)
	c := newTestCheckpointer(t, backend{url: r.URL(), kind: KindSimple}, t.Name())
	ctx := t.Context()
	const interval = 100 * time.Millisecond
	round := func(seed Discovery, found ...streams.Identity) Discovery {
		t.Helper()
		for {
			d, rd, err := c.DiscoverStreamsSeeded(ctx, "a", interval, time.Hour, seed, func(context.Context) ([]streams.Identity, error) { return found, nil })
			require.NoError(t, err)
			if rd.Listed {
				return d
			}
			time.Sleep(interval / 4)
		}
	}
	first := round(Discovery{}, ident("t-1", 1000))
	time.Sleep(interval)
	before := round(first, ident("t-1", 1000), ident("t-2", 2000))
	require.Len(t, before.Listed(), 2)
	require.True(t, before.Listed()[1].Appeared, "t-2 came after the first listing")

	rc := r.Client()
	defer rc.Close()
	require.NoError(t, rc.FlushAll(ctx).Err())
	after := round(before, ident("t-1", 1000), ident("t-2", 2000), ident("t-3", 3000))
	assert.Equal(t, before.FirstListedAt, after.FirstListedAt, "the group's first listing is kept")
	got := map[string]DiscoveredStream{}
	for _, s := range after.Listed() {
		got[s.Name] = s
	}
	require.Len(t, got, 3)
	assert.False(t, got["t-1"].Appeared, "t-1 was of the first listing")
	assert.True(t, got["t-2"].Appeared, "t-2 still appeared")
	assert.Equal(t, before.Listed()[0].Seen, got["t-1"].Seen, "seen kept")
	assert.True(t, got["t-3"].Appeared, "t-3, created while Redis was empty, appeared")

	// Without a seed (an instance that never read the result) the wipe
	// starts the group's discovery afresh, as before.
	require.NoError(t, rc.FlushAll(ctx).Err())
	fresh := round(Discovery{}, ident("t-4", 4000))
	assert.False(t, fresh.Listed()[0].Appeared)
}

// TestIntegrationDiscoveryLongListingIsPublished: a listing that takes
// longer than the interval (many streams to describe) keeps the group's
// lease while it runs, so another instance asking all along never lists
// meanwhile and the long listing is published. Without the renewal the
// other instance claimed the lapsed lease and the long listing was fenced.
func TestIntegrationDiscoveryLongListingIsPublished(t *testing.T) {
	t.Parallel()
	r := testenv.NewRedis(t)
	b := backend{url: r.URL(), kind: KindSimple}
	slow, other := newTestCheckpointer(t, b, t.Name()), newTestCheckpointer(t, b, t.Name())
	ctx := t.Context()
	const interval = 300 * time.Millisecond
	stop := make(chan struct{})
	otherListed := make(chan bool, 1)
	go func() {
		listed := false
		defer func() { otherListed <- listed }()
		for {
			select {
			case <-stop:
				return
			case <-time.After(20 * time.Millisecond):
			}
			_, rd, err := other.DiscoverStreams(ctx, "other", interval, time.Hour, func(context.Context) ([]streams.Identity, error) {
				return []streams.Identity{ident("t-other", 1)}, nil
			})
			if err == nil && rd.Listed {
				listed = true
			}
		}
	}()
	_, rd, err := slow.DiscoverStreams(ctx, "slow", interval, time.Hour, func(context.Context) ([]streams.Identity, error) {
		time.Sleep(3 * interval)
		return []streams.Identity{ident("t-slow", 1)}, nil
	})
	close(stop)
	require.NoError(t, err)
	assert.False(t, <-otherListed, "no other instance lists while the long listing holds the lease")
	assert.True(t, rd.Listed, "the listing three intervals long is published")
}
