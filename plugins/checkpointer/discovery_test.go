package checkpointer

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/service/kinesis/types"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/connect-kinesis/connect-kinesis/internal/streams"
	"github.com/connect-kinesis/connect-kinesis/internal/testenv"
)

func arnOf(name string) string { return "arn:aws:kinesis:us-east-1:000000000000:stream/" + name }

func ident(name string, created int64) streams.Identity {
	return streams.Identity{Name: name, ARN: arnOf(name), Created: time.UnixMilli(created), Status: types.StreamStatusActive}
}

// TestIntegrationDiscoveryOneListerPerInterval{Single,Cluster}: six
// instances of a group each run a discovery round every 20 ms for four
// intervals; the streams are listed once per interval (never twice within
// one), and every instance reads the same result.
func TestIntegrationDiscoveryOneListerPerIntervalSingle(t *testing.T) {
	t.Parallel()
	r := testenv.NewRedis(t)
	runOneListerPerInterval(t, backend{url: r.URL(), kind: KindSimple})
}

func TestIntegrationDiscoveryOneListerPerIntervalCluster(t *testing.T) {
	t.Parallel()
	c := testenv.NewRedisCluster(t)
	runOneListerPerInterval(t, backend{url: c.URL(), kind: KindCluster})
}

func runOneListerPerInterval(t *testing.T, b backend) {
	const (
		instances = 6
		interval  = time.Second
		rounds    = 4
	)
	var (
		mu     sync.Mutex
		starts []time.Time
		calls  atomic.Int64
	)
	list := func(context.Context) ([]streams.Identity, error) {
		n := calls.Add(1)
		mu.Lock()
		starts = append(starts, time.Now())
		mu.Unlock()
		return []streams.Identity{ident("t-1", 1000), ident(fmt.Sprintf("t-round-%d", n), 2000)}, nil
	}
	ctx, cancel := context.WithTimeout(t.Context(), rounds*interval)
	defer cancel()
	var wg sync.WaitGroup
	last := make([]Discovery, instances)
	for i := range instances {
		c := newTestCheckpointer(t, b, t.Name())
		owner := fmt.Sprintf("instance-%d", i)
		wg.Go(func() {
			tick := time.NewTicker(20 * time.Millisecond)
			defer tick.Stop()
			for {
				d, _, err := c.DiscoverStreams(ctx, owner, interval, time.Hour, list)
				if deadline, _ := ctx.Deadline(); ctx.Err() != nil || !time.Now().Before(deadline) {
					// The run's end: go-redis times the connection out at
					// ctx's deadline, a moment before ctx reports it.
					return
				}
				if assert.NoError(t, err) {
					last[i] = d
				}
				select {
				case <-ctx.Done():
					return
				case <-tick.C:
				}
			}
		})
	}
	wg.Wait()
	mu.Lock()
	defer mu.Unlock()
	t.Logf("%d listings by %d instances in %v", len(starts), instances, rounds*interval)
	assert.GreaterOrEqual(t, len(starts), rounds-1, "the group lists about once per interval")
	assert.LessOrEqual(t, len(starts), rounds, "at most once per interval")
	for i := 1; i < len(starts); i++ {
		// The Redis clock gates the next claim an interval after the last
		// publish; this clock can read a little differently.
		assert.GreaterOrEqual(t, starts[i].Sub(starts[i-1]), interval-50*time.Millisecond, "listings %d and %d", i-1, i)
	}
	final := fmt.Sprintf("t-round-%d", len(starts))
	for i, d := range last {
		listed := d.Listed()
		require.Len(t, listed, 2, "instance %d", i)
		assert.Equal(t, final, listed[1].Name, "instance %d reads the last listing", i)
	}
}

// TestIntegrationDiscoveryHolderThatDiesIsReplaced: an instance that
// claims the lease and dies before it publishes holds up the group's
// listing for one interval, no longer; its late publish is then refused.
func TestIntegrationDiscoveryHolderThatDiesIsReplaced(t *testing.T) {
	t.Parallel()
	r := testenv.NewRedis(t)
	b := backend{url: r.URL(), kind: KindSimple}
	const interval = 1500 * time.Millisecond
	ctx := t.Context()
	dead, alive := newTestCheckpointer(t, b, t.Name()), newTestCheckpointer(t, b, t.Name())
	claim, err := dead.ClaimDiscovery(ctx, "dead", interval)
	require.NoError(t, err)
	require.True(t, claim.Granted)
	claimedAt := time.Now()

	var listedAt time.Time
	for listedAt.IsZero() {
		_, round, err := alive.DiscoverStreams(ctx, "alive", interval, time.Hour, func(context.Context) ([]streams.Identity, error) {
			return []streams.Identity{ident("t-1", 1000)}, nil
		})
		require.NoError(t, err)
		if round.Listed {
			listedAt = time.Now()
		}
		time.Sleep(50 * time.Millisecond)
	}
	waited := listedAt.Sub(claimedAt)
	t.Logf("replaced after %v (interval %v)", waited, interval)
	assert.GreaterOrEqual(t, waited, interval-50*time.Millisecond, "not before the dead holder's lease lapsed")

	published, _, err := dead.PublishDiscovery(ctx, "dead", claim.Token, nil, time.Hour)
	require.NoError(t, err)
	assert.False(t, published, "the dead holder's late listing is fenced")
	d, err := alive.ReadDiscovery(ctx)
	require.NoError(t, err)
	require.Len(t, d.Listed(), 1)
	assert.Equal(t, "t-1", d.Listed()[0].Name)
	assert.Equal(t, "alive", d.Holder)
}
