package coordinator

import (
	"context"
	"errors"
	"slices"
	"sync/atomic"
	"testing"
	"time"

	"github.com/connect-kinesis/connect-kinesis/internal/consumer"
	"github.com/connect-kinesis/connect-kinesis/internal/consumer/consumertest"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// downStore is a consumertest.Store whose Redis can be made unreachable.
type downStore struct {
	*consumertest.Store
	down atomic.Bool
}

var errDown = errors.New("dial tcp 127.0.0.1:6379: connect: connection refused")

func (s *downStore) RenewAll(ctx context.Context, owner string, ls []consumer.Lease) ([]consumer.Lease, []string, error) {
	if s.down.Load() {
		return nil, nil, errDown
	}
	return s.Store.RenewAll(ctx, owner, ls)
}

func (s *downStore) Commit(ctx context.Context, l consumer.Lease, p consumer.Position) error {
	if s.down.Load() {
		return errDown
	}
	return s.Store.Commit(ctx, l, p)
}

func (s *downStore) Heartbeat(ctx context.Context, m string) error {
	if s.down.Load() {
		return errDown
	}
	return s.Store.Heartbeat(ctx, m)
}

func (s *downStore) LiveMembers(ctx context.Context) ([]string, error) {
	if s.down.Load() {
		return nil, errDown
	}
	return s.Store.LiveMembers(ctx)
}

// A Redis that stalls or is away past the lease's local deadline is not a
// lost lease (issue: "Renewing leases failed; stopping shard readers" on a
// 2.5 s freeze, and every record since the last commit read again). The
// reader reads nothing past its deadline, and once a renewal finds nobody
// took the lease it goes on from where it was: no record twice, none lost.
func TestConsumerGoesOnFromWhereItWasWhenRedisComesBackAfterTheDeadline(t *testing.T) {
	api := consumertest.NewKinesis()
	const shard = "shardId-000000000000"
	api.Add(shard, &consumertest.KinesisShard{Records: 1000000})
	cfg := testConfig()
	cfg.Limit = 5
	st := &downStore{Store: consumertest.NewStore(cfg.LeasePeriod)}
	c := startConsumer(t, cfg, api, st)
	log := &acked{}
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	go ackAll(ctx, c, log)
	require.Eventually(t, func() bool { return len(log.all()) > 0 }, 10*time.Second, 10*time.Millisecond)

	r := c.coords[0].readerFor(shard)
	require.NotNil(t, r)
	st.down.Store(true)
	// Twice the lease period: the local deadline passes.
	time.Sleep(2 * cfg.LeasePeriod)
	assert.False(t, r.LeaseLive(), "the local deadline passed while Redis was away")
	n := len(log.all())
	time.Sleep(cfg.LeasePeriod / 2)
	assert.Len(t, log.all(), n, "nothing delivered past the lease's local deadline")
	st.down.Store(false)
	require.Eventually(t, func() bool { return len(log.all()) > n+50 }, 10*time.Second, 10*time.Millisecond)

	assert.False(t, r.Lost(), "the reader was stopped although nobody took its lease")
	assert.True(t, r == c.coords[0].readerFor(shard), "the same reader goes on")
	got := log.all()
	for i, d := range got {
		if !assert.Equal(t, shard+"/"+itoa(i+1), d, "every record once, in order") {
			break
		}
	}
}

func TestTwoConsumersShareShardsAndHandOffOnClose(t *testing.T) {
	api := consumertest.NewKinesis()
	shards := []string{"shardId-000000000000", "shardId-000000000001", "shardId-000000000002", "shardId-000000000003"}
	for _, id := range shards {
		api.Add(id, &consumertest.KinesisShard{Records: 1000000})
	}
	st := consumertest.NewStore(600 * time.Millisecond)
	owned := func() map[string]int {
		ls, _ := st.Leases(t.Context())
		out := map[string]int{}
		for _, l := range ls {
			if !l.Expired {
				out[l.Owner]++
			}
		}
		return out
	}
	log := &acked{}
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()

	a := startConsumer(t, testConfig(), api, st)
	go ackAll(ctx, a, log)
	require.Eventually(t, func() bool { return owned()[a.Owner()] == 4 }, 10*time.Second, 10*time.Millisecond)

	b, err := New(testConfig(), api, func(string) consumer.Store { return st }, nil, nil)
	require.NoError(t, err)
	require.NoError(t, b.Start(t.Context()))
	bctx, bcancel := context.WithCancel(ctx)
	bDone := make(chan struct{})
	go func() { ackAll(bctx, b, log); close(bDone) }()
	require.Eventually(t, func() bool {
		o := owned()
		return o[a.Owner()] == 2 && o[b.Owner()] == 2
	}, 10*time.Second, 10*time.Millisecond, "fair share: two shards each")

	// Closing b hands its shards back; its acker keeps acking until Close
	// returns, as Benthos does while it drains.
	closeCtx, closeCancel := context.WithTimeout(t.Context(), 5*time.Second)
	defer closeCancel()
	require.NoError(t, b.Close(closeCtx))
	bcancel()
	<-bDone
	require.Eventually(t, func() bool { return owned()[a.Owner()] == 4 }, 10*time.Second, 10*time.Millisecond)
	// Let a read on from b's checkpoints before checking for duplicates.
	n := len(log.all())
	require.Eventually(t, func() bool { return len(log.all()) > n+40 }, 10*time.Second, 10*time.Millisecond)

	seen := map[string]bool{}
	for _, d := range log.all() {
		assert.False(t, seen[d], "record %s delivered twice across the hand-off", d)
		seen[d] = true
	}
}

func TestThreeConsumersSettleOnFairShares(t *testing.T) {
	api := consumertest.NewKinesis()
	for _, id := range []string{"shardId-000000000000", "shardId-000000000001", "shardId-000000000002", "shardId-000000000003"} {
		api.Add(id, &consumertest.KinesisShard{Records: 1000000})
	}
	st := consumertest.NewStore(600 * time.Millisecond)
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	log := &acked{}
	var cs []*Consumer
	for range 3 {
		c := startConsumer(t, testConfig(), api, st)
		go ackAll(ctx, c, log)
		cs = append(cs, c)
	}
	shares := func() []int {
		ls, _ := st.Leases(t.Context())
		per := map[string]int{}
		for _, l := range ls {
			if !l.Expired {
				per[l.Owner]++
			}
		}
		var out []int
		for _, c := range cs {
			out = append(out, per[c.Owner()])
		}
		slices.Sort(out)
		return out
	}
	require.Eventually(t, func() bool {
		s := shares()
		return s[0] == 1 && s[1] == 1 && s[2] == 2
	}, 10*time.Second, 10*time.Millisecond, "four shards over three instances: 2, 1, 1")
	// And it stays settled: no shard keeps moving between instances.
	taken := func() int {
		st.Mu.Lock()
		defer st.Mu.Unlock()
		return int(st.Tokens)
	}
	// The shares pass through 2, 1, 1 while a hand-off asked for earlier
	// may still be under way (seen in 2 of 60 runs under -race, before and
	// after the last changes alike): settled is 2, 1, 1 with no lease taken
	// for three balancing rounds of each instance.
	quiet := func() (int, int) {
		for range 10 {
			before, rounds := taken(), st.BalancingRounds()
			require.Eventually(t, func() bool { return st.BalancingRounds() >= rounds+3*len(cs) }, 10*time.Second, 10*time.Millisecond,
				"three more balancing rounds of each instance")
			if taken() == before {
				return before, st.BalancingRounds()
			}
		}
		require.Fail(t, "leases kept changing hands at 2, 1, 1")
		return 0, 0
	}
	before, rounds := quiet()
	require.Eventually(t, func() bool { return st.BalancingRounds() >= rounds+10*len(cs) }, 10*time.Second, 10*time.Millisecond,
		"ten more balancing rounds of each instance")
	assert.Equal(t, before, taken(), "no lease changed hands once balanced")
	assert.Equal(t, []int{1, 1, 2}, shares())
}
