package coordinator

import (
	"context"
	"testing"
	"time"

	"github.com/connect-kinesis/connect-kinesis/internal/consumer"
	"github.com/connect-kinesis/connect-kinesis/internal/consumer/consumertest"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// slowPollConfig reads one record per call at a poll_interval far longer
// than a renewal (lease period / 3) plus a balancing round, so a reader
// that took a shard without waiting would call within the previous
// reader's poll_interval.
func slowPollConfig() consumer.Config {
	cfg := testConfig()
	cfg.Limit = 1
	cfg.PollInterval = time.Second
	cfg.IdlePollInterval = time.Second
	return cfg
}

// waitNextCall waits until the shard has had more than n GetRecords calls
// and returns the new count.
func waitNextCall(t *testing.T, api *consumertest.Kinesis, shard string, n int) int {
	t.Helper()
	require.Eventually(t, func() bool { return len(api.CallTimes(shard)) > n }, 10*time.Second, time.Millisecond)
	return len(api.CallTimes(shard))
}

// assertPaced checks that every GetRecords call of the shard came at least
// poll apart from the previous one, whichever reader or instance made it:
// the 5 calls/s of a shard are shared by all of them.
func assertPaced(t *testing.T, api *consumertest.Kinesis, shard string, poll time.Duration) {
	t.Helper()
	calls := api.CallTimes(shard)
	for i := 1; i < len(calls); i++ {
		assert.GreaterOrEqual(t, calls[i].Sub(calls[i-1]), poll, "GetRecords %d of %d came %v after the previous one", i, len(calls), calls[i].Sub(calls[i-1]))
	}
}

func TestConsumerPacesAShardAcrossItsLeaseLostAndTakenAgain(t *testing.T) {
	api := consumertest.NewKinesis()
	const shard = "shardId-000000000000"
	api.Add(shard, &consumertest.KinesisShard{Records: 1000000})
	st := consumertest.NewStore(600 * time.Millisecond)
	cfg := slowPollConfig()
	c := startConsumer(t, cfg, api, st)
	log := &acked{}
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	go ackAll(ctx, c, log)

	n := waitNextCall(t, api, shard, 0)
	for range 3 {
		old := c.coords[0].readerFor(shard)
		require.NotNil(t, old)
		// Right after a call, the store forgets the lease (a flushed key):
		// the next renewal finds it lost, the reader stops and the next
		// balancing round takes the shard again, well within the poll
		// interval of that call.
		n = waitNextCall(t, api, shard, n)
		st.Mu.Lock()
		delete(st.LeaseMap, shard)
		st.Mu.Unlock()
		require.Eventually(t, func() bool {
			r := c.coords[0].readerFor(shard)
			return r != nil && r != old
		}, 10*time.Second, time.Millisecond, "the shard is taken again")
	}
	n = waitNextCall(t, api, shard, n)
	n = waitNextCall(t, api, shard, n)

	assertPaced(t, api, shard, cfg.PollInterval)
}

// handOffRig is one shard read by a first instance, a, whose closing hands
// the shard to a second one. a is started here rather than by
// startConsumer because the tests close it themselves.
type handOffRig struct {
	api *consumertest.Kinesis
	st  *consumertest.Store
	a   *Consumer
	ctx context.Context
	log *acked
}

const rigShard = "shardId-000000000000"

func newHandOffRig(t *testing.T, cfg consumer.Config) handOffRig {
	api := consumertest.NewKinesis()
	api.Add(rigShard, &consumertest.KinesisShard{Records: 1000000})
	st := consumertest.NewStore(600 * time.Millisecond)
	ctx, cancel := context.WithCancel(t.Context())
	t.Cleanup(cancel)
	a, err := New(cfg, api, func(string) consumer.Store { return st }, nil, nil)
	require.NoError(t, err)
	require.NoError(t, a.Start(t.Context()))
	r := handOffRig{api: api, st: st, a: a, ctx: ctx, log: &acked{}}
	go ackAll(ctx, a, r.log)
	return r
}

// closeA shuts a down: it commits and releases its lease.
func (r handOffRig) closeA(t *testing.T) {
	ctx, cancel := context.WithTimeout(t.Context(), 5*time.Second)
	defer cancel()
	require.NoError(t, r.a.Close(ctx))
}

// startB starts the second instance on the same store.
func (r handOffRig) startB(t *testing.T, cfg consumer.Config) *Consumer {
	b := startConsumer(t, cfg, r.api, r.st)
	go ackAll(r.ctx, b, r.log)
	return b
}

func TestConsumerPacesAShardAcrossAHandOffToAnotherInstance(t *testing.T) {
	cfg := slowPollConfig()
	r := newHandOffRig(t, cfg)
	n := waitNextCall(t, r.api, rigShard, 0)
	// b joins, one shard short of nothing: it asks for no hand-off, it
	// waits for the shard to be free.
	b := r.startB(t, cfg)
	require.Eventually(t, func() bool {
		live, _ := r.st.LiveMembers(t.Context())
		return len(live) == 2
	}, 10*time.Second, time.Millisecond)

	// Right after one of a's calls, a shuts down: it commits and releases,
	// and b's next balancing round takes the shard.
	n = waitNextCall(t, r.api, rigShard, n)
	r.closeA(t)
	n = waitNextCall(t, r.api, rigShard, n)
	waitNextCall(t, r.api, rigShard, n)
	ls, _ := r.st.Leases(t.Context())
	require.Equal(t, b.Owner(), ls[rigShard].Owner, "b reads the shard now")

	assertPaced(t, r.api, rigShard, cfg.PollInterval)
}

// TestConsumerReadsAtOnceAShardLongUnread: a shard whose previous lease
// ended more than poll_interval ago is read as soon as it is taken; only a
// recent change of reader waits.
func TestConsumerReadsAtOnceAShardLongUnread(t *testing.T) {
	cfg := slowPollConfig()
	cfg.PollInterval, cfg.IdlePollInterval = 3*time.Second, 3*time.Second
	r := newHandOffRig(t, cfg)
	waitNextCall(t, r.api, rigShard, 0)
	r.closeA(t)
	released := time.Now()
	time.Sleep(cfg.PollInterval) // the shard stays unread longer than poll_interval

	n := len(r.api.CallTimes(rigShard))
	r.startB(t, cfg)
	waitNextCall(t, r.api, rigShard, n)
	first := r.api.CallTimes(rigShard)[n]
	assert.Less(t, first.Sub(released), cfg.PollInterval+2*time.Second,
		"b's first call came %v after the release; it should not wait another poll_interval", first.Sub(released))
	assertPaced(t, r.api, rigShard, cfg.PollInterval)
}
