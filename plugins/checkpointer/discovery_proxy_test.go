package checkpointer

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/service/kinesis"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/connect-kinesis/connect-kinesis/internal/faultproxy"
	"github.com/connect-kinesis/connect-kinesis/internal/kinesisx"
	"github.com/connect-kinesis/connect-kinesis/internal/streams"
	"github.com/connect-kinesis/connect-kinesis/internal/testenv"
)

// TestIntegrationDiscoveryListStreamsCountedAtTheProxy: four instances of
// a group, each with its own Kinesis client (through the fault proxy, a
// third of ListStreams calls throttled) and its own Redis client, run
// discovery every 50 ms for five intervals against kinesis-mock. The proxy
// counts at most one ListStreams per interval for the group, plus the
// throttled calls retried, and a stream created mid-run is in every
// instance's result within three intervals (seen: half a second).
func TestIntegrationDiscoveryListStreamsCountedAtTheProxy(t *testing.T) {
	t.Parallel()
	k := testenv.NewKinesisMock(t) // its own: the count is of this test's calls only
	r := testenv.NewRedis(t)
	proxy, err := faultproxy.Start(k.Endpoint, 1)
	require.NoError(t, err)
	t.Cleanup(func() { _ = proxy.Close() })
	proxy.Set("ListStreams", faultproxy.Rule{ThrottleRate: 0.34})

	const (
		instances = 4
		interval  = time.Second
		intervals = 5
	)
	base := testenv.StreamName(t)
	k.MustCreateStream(t, base+"-1", 1)
	k.MustCreateStream(t, base+"-2", 1)
	rules, err := streams.ParseRules([]string{base + "-*"}, nil)
	require.NoError(t, err)

	ctx, cancel := context.WithTimeout(t.Context(), intervals*interval)
	defer cancel()
	var (
		mu      sync.Mutex
		firstAt = map[int]time.Time{} // when each instance first saw -3
		wg      sync.WaitGroup
	)
	for i := range instances {
		cp := newTestCheckpointer(t, backend{url: r.URL(), kind: KindSimple}, t.Name())
		api := testenv.KinesisClient(proxy.URL, func(o *kinesis.Options) { o.RetryMaxAttempts = 1 })
		lister := streams.NewLister(api, kinesisx.DefaultBackoff)
		list := func(ctx context.Context) ([]streams.Identity, error) { return lister.List(ctx, rules) }
		owner := fmt.Sprintf("instance-%d", i)
		wg.Go(func() {
			for ctx.Err() == nil {
				d, _, err := cp.DiscoverStreams(ctx, owner, interval, time.Hour, list)
				if err == nil {
					for _, s := range d.Listed() {
						mu.Lock()
						if _, ok := firstAt[i]; !ok && s.Name == base+"-3" {
							firstAt[i] = time.Now()
						}
						mu.Unlock()
					}
				}
				select {
				case <-ctx.Done():
				case <-time.After(50 * time.Millisecond):
				}
			}
		})
	}
	time.Sleep(interval + interval/2)
	k.MustCreateStream(t, base+"-3", 1)
	created := time.Now()
	wg.Wait()

	st := proxy.Stats("ListStreams")
	t.Logf("ListStreams at the proxy: %d requests, %d throttled, by %d instances in %d intervals", st.Requests, st.Throttled, instances, intervals)
	assert.LessOrEqual(t, st.Requests-st.Throttled, intervals, "at most one listing per interval for the group")
	assert.GreaterOrEqual(t, st.Requests-st.Throttled, intervals-2, "the group keeps listing")
	mu.Lock()
	defer mu.Unlock()
	require.Len(t, firstAt, instances, "every instance saw the new stream")
	for i, at := range firstAt {
		t.Logf("instance %d saw the new stream %v after it was created", i, at.Sub(created).Round(time.Millisecond))
		assert.Less(t, at.Sub(created), 3*interval, "instance %d: the bound the issue sets (3 intervals)", i)
	}
}
