package coordinator

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/redpanda-data/benthos/v4/public/service"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/connect-kinesis/connect-kinesis/internal/consumer"
	"github.com/connect-kinesis/connect-kinesis/internal/consumer/consumertest"
)

// groupCalls counts the group checks every stream's batchCheckStore makes.
type groupCalls struct {
	mu       sync.Mutex
	batches  int // CheckGroups calls
	singles  int // CheckGroup calls
	largest  int // most stores in one CheckGroups call
	beatAlls int // HeartbeatAll calls
	beats    int // Heartbeat calls
	// renewStreams and progressAlls count the batched renewals and
	// progress; renewAlls the renewals of one stream.
	renewStreams, progressAlls, renewAlls int
	// roundAlls count the batched balancing-round reads, roundOnes the
	// reads of one stream's round.
	roundAlls, roundOnes, loadOnes int
	forget                         map[string]bool
	reseeded                       map[string]int
	// roundsDown, when set, is what every batched round read fails with.
	roundsDown error
}

// batchCheckStore is a stream's fake store that checks the group record of
// every stream in one call, as the Redis store does outside a Cluster.
type batchCheckStore struct {
	*consumertest.Store
	id    string
	calls *groupCalls
}

func (s *batchCheckStore) CheckGroup(context.Context) error {
	s.calls.mu.Lock()
	defer s.calls.mu.Unlock()
	s.calls.singles++
	if s.calls.forget[s.id] {
		return consumer.ErrStoreForgot
	}
	return nil
}

func (s *batchCheckStore) CheckGroups(_ context.Context, stores []consumer.Store) []error {
	s.calls.mu.Lock()
	defer s.calls.mu.Unlock()
	s.calls.batches++
	s.calls.largest = max(s.calls.largest, len(stores))
	errs := make([]error, len(stores))
	for i, st := range stores {
		if s.calls.forget[st.(*batchCheckStore).id] {
			errs[i] = consumer.ErrStoreForgot
		}
	}
	return errs
}

func (s *batchCheckStore) Heartbeat(ctx context.Context, member string) error {
	s.calls.mu.Lock()
	s.calls.beats++
	s.calls.mu.Unlock()
	return s.Store.Heartbeat(ctx, member)
}

func (s *batchCheckStore) HeartbeatAll(ctx context.Context, member string, stores []consumer.Store) []error {
	s.calls.mu.Lock()
	s.calls.beatAlls++
	s.calls.mu.Unlock()
	errs := make([]error, len(stores))
	for i, st := range stores {
		errs[i] = st.(*batchCheckStore).Store.Heartbeat(ctx, member)
	}
	return errs
}

// RenewAll finds what the check found: the renewal it wakes confirms a
// store that forgot, and re-seeds.
func (s *batchCheckStore) RenewAll(ctx context.Context, owner string, ls []consumer.Lease) ([]consumer.Lease, []string, error) {
	s.calls.mu.Lock()
	s.calls.renewAlls++
	s.calls.mu.Unlock()
	return s.renewAll(ctx, owner, ls)
}

func (s *batchCheckStore) renewAll(ctx context.Context, owner string, ls []consumer.Lease) ([]consumer.Lease, []string, error) {
	s.calls.mu.Lock()
	forgot := s.calls.forget[s.id]
	s.calls.mu.Unlock()
	if forgot {
		return nil, nil, consumer.ErrStoreForgot
	}
	return s.Store.RenewAll(ctx, owner, ls)
}

func (s *batchCheckStore) RenewStreams(ctx context.Context, owner string, stores []consumer.Store, leases [][]consumer.Lease) []consumer.Renewal {
	s.calls.mu.Lock()
	s.calls.renewStreams++
	s.calls.mu.Unlock()
	out := make([]consumer.Renewal, len(stores))
	for i, st := range stores {
		r := &out[i]
		r.Renewed, r.Lost, r.Err = st.(*batchCheckStore).renewAll(ctx, owner, leases[i])
	}
	return out
}

func (s *batchCheckStore) PublishProgressAll(ctx context.Context, owner string, stores []consumer.Store, ps []map[string]consumer.Progress) []error {
	s.calls.mu.Lock()
	s.calls.progressAlls++
	s.calls.mu.Unlock()
	errs := make([]error, len(stores))
	for i, st := range stores {
		errs[i] = st.(*batchCheckStore).Store.PublishProgress(ctx, owner, ps[i])
	}
	return errs
}

func (s *batchCheckStore) ReadRound(ctx context.Context, owner string) (consumer.Round, error) {
	s.calls.mu.Lock()
	s.calls.roundOnes++
	s.calls.mu.Unlock()
	return s.round(ctx, owner)
}

func (s *batchCheckStore) round(ctx context.Context, owner string) (consumer.Round, error) {
	s.calls.mu.Lock()
	forgot := s.calls.forget[s.id]
	s.calls.mu.Unlock()
	if forgot {
		return consumer.Round{}, consumer.ErrStoreForgot
	}
	var rd consumer.Round
	rd.Members, _ = s.Store.LiveMembers(ctx)
	rd.Closed, _ = s.Store.ClosedShards(ctx)
	rd.Leases, _ = s.Store.Leases(ctx)
	rd.Handoffs, _ = s.Store.HandoffRequests(ctx, owner)
	return rd, nil
}

func (s *batchCheckStore) ReadRounds(ctx context.Context, owner string, stores []consumer.Store, loads bool) ([]consumer.Round, []error) {
	s.calls.mu.Lock()
	s.calls.roundAlls++
	down := s.calls.roundsDown
	s.calls.mu.Unlock()
	rounds, errs := make([]consumer.Round, len(stores)), make([]error, len(stores))
	if down != nil {
		for i := range errs {
			errs[i] = down
		}
		return rounds, errs
	}
	for i, st := range stores {
		rounds[i], errs[i] = st.(*batchCheckStore).round(ctx, owner)
		if errs[i] == nil && loads {
			rounds[i].Loads, errs[i] = st.(*batchCheckStore).Store.ShardLoads(ctx)
			if rounds[i].Loads == nil {
				rounds[i].Loads = map[string]consumer.ShardLoad{}
			}
		}
	}
	return rounds, errs
}

// ShardLoads counts the reads of one stream's loads, which the batched
// rounds carry when balancing by load.
func (s *batchCheckStore) ShardLoads(ctx context.Context) (map[string]consumer.ShardLoad, error) {
	s.calls.mu.Lock()
	s.calls.loadOnes++
	s.calls.mu.Unlock()
	return s.Store.ShardLoads(ctx)
}

func (s *batchCheckStore) Reseed(ctx context.Context, seed consumer.Seed) (consumer.Reseeded, error) {
	s.calls.mu.Lock()
	s.calls.reseeded[s.id]++
	delete(s.calls.forget, s.id)
	s.calls.mu.Unlock()
	return s.Store.Reseed(ctx, seed)
}

// An instance reading many streams checks their group records in one call
// an interval, and heartbeats, renews and publishes progress in all of
// them in one call each a third of the lease, and reads their balancing
// rounds in one call a balancing period, not one per stream (issue 37: the steady-state Redis cost
// per shard must not grow with the number of streams), and a store that
// forgot one stream's record has that stream re-seeded, not the others.
func TestSharedRoundsAreOneCallForEveryStream(t *testing.T) {
	t.Parallel()
	const streams = 8
	calls := &groupCalls{forget: map[string]bool{}, reseeded: map[string]int{}}
	c, cfg, by, storeOf, names := batchedStreams(t, "g", streams, calls, nil)
	var got streamLog
	go ackInto(t.Context(), c, &got)

	every := consumer.GroupCheckInterval(cfg.LeasePeriod)
	require.Eventually(t, func() bool {
		calls.mu.Lock()
		defer calls.mu.Unlock()
		return calls.largest == streams
	}, 10*time.Second, every/4, "one check covers every stream once each reads its shard")

	calls.mu.Lock()
	b0, s0, ba0, be0 := calls.batches, calls.singles, calls.beatAlls, calls.beats
	rs0, ra0, pa0 := calls.renewStreams, calls.renewAlls, calls.progressAlls
	rr0, ro0, lo0 := calls.roundAlls, calls.roundOnes, calls.loadOnes
	calls.mu.Unlock()
	const rounds = 12
	time.Sleep(rounds * every) // counting what a stretch of time costs: nothing to wait for
	calls.mu.Lock()
	batches, singles, beatAlls, beats := calls.batches-b0, calls.singles-s0, calls.beatAlls-ba0, calls.beats-be0
	renewStreams, renewAlls, progressAlls := calls.renewStreams-rs0, calls.renewAlls-ra0, calls.progressAlls-pa0
	roundAlls, roundOnes, loadOnes := calls.roundAlls-rr0, calls.roundOnes-ro0, calls.loadOnes-lo0
	calls.mu.Unlock()
	wantRounds := int(rounds * every / cfg.RebalancePeriod)
	assert.Zero(t, roundOnes, "no stream reads its balancing round on its own, nor after a listing that changed nothing (every %v)", cfg.DiscoveryInterval)
	assert.Zero(t, loadOnes, "nor its loads (balancing by load, the default): the rounds' read carries them")
	assert.LessOrEqual(t, roundAlls, wantRounds+1, "one round read a balancing period for %d streams", streams)
	assert.GreaterOrEqual(t, roundAlls, wantRounds/2, "the rounds still run")
	assert.Zero(t, singles, "no stream is checked on its own")
	assert.LessOrEqual(t, batches, rounds+1, "one call an interval for %d streams, not %d", streams, streams*rounds)
	assert.GreaterOrEqual(t, batches, rounds/2, "the check still runs every interval")
	assert.Zero(t, beats, "no stream heartbeats on its own")
	beatEvery := cfg.LeasePeriod / 3
	wantBeats := int(rounds * every / beatEvery)
	assert.LessOrEqual(t, beatAlls, wantBeats+1, "one heartbeat call a third of the lease for %d streams", streams)
	assert.GreaterOrEqual(t, beatAlls, wantBeats/2, "the member still heartbeats")
	assert.Zero(t, renewAlls, "no stream renews on its own")
	assert.LessOrEqual(t, renewStreams, wantBeats+1, "one renewal call a third of the lease for %d streams", streams)
	assert.GreaterOrEqual(t, renewStreams, wantBeats/2, "the leases are still renewed")
	assert.LessOrEqual(t, progressAlls, wantBeats+1, "one progress call a third of the lease for %d streams", streams)
	assert.GreaterOrEqual(t, progressAlls, wantBeats/2, "the progress is still published")
	for _, n := range names {
		st := by[consumertest.FakeARNPrefix+n]
		st.Mu.Lock()
		l := st.LeaseMap["shardId-000000000000"]
		live := st.Live(l, true) && l.Owner == "a"
		st.Mu.Unlock()
		assert.True(t, live, "%s's lease is held and renewed past %d lease periods", n, int(rounds*every/cfg.LeasePeriod))
	}
	for _, n := range names {
		live, err := storeOf(consumertest.FakeARNPrefix + n).LiveMembers(t.Context())
		require.NoError(t, err)
		assert.Equal(t, []string{"a"}, live, "the member is live in %s", n)
	}

	// A lease another instance took is found lost by the shared renewal,
	// in its stream alone, and its reader stops.
	const stolen = consumertest.FakeARNPrefix + "g-2"
	st := by[stolen]
	st.Mu.Lock()
	st.LoseOnRenew = map[string]bool{"shardId-000000000000": true}
	st.Mu.Unlock()
	var co2 *coordinator
	c.mu.Lock()
	for _, co := range c.coords {
		if co.id == stolen {
			co2 = co
		}
	}
	c.mu.Unlock()
	require.NotNil(t, co2)
	require.Eventually(t, func() bool { return len(co2.readersNow()) == 0 }, 10*time.Second, every/4, "the reader of the stolen lease stops")

	const lost = consumertest.FakeARNPrefix + "g-5"
	calls.mu.Lock()
	require.Contains(t, by, lost)
	calls.forget[lost] = true
	calls.mu.Unlock()
	require.Eventually(t, func() bool {
		calls.mu.Lock()
		defer calls.mu.Unlock()
		return calls.reseeded[lost] > 0
	}, 10*time.Second, every/4, "the stream whose record is gone is re-seeded")
	time.Sleep(2 * every) // would any other stream be re-seeded too
	calls.mu.Lock()
	defer calls.mu.Unlock()
	for id, n := range calls.reseeded {
		if id != lost {
			assert.Zero(t, n, "%s was re-seeded though its record is there", id)
		}
	}
}

// A batched round read that fails fails every stream it covered with one
// error: it is logged once a balancing period, not once per stream (during
// each Redis restart of the soak, one line per stream a period).
func TestAFailedRoundsReadIsLoggedOnce(t *testing.T) {
	t.Parallel()
	const streams = 6
	calls := &groupCalls{forget: map[string]bool{}, reseeded: map[string]int{}}
	var logs consumertest.SyncBuffer
	c, cfg, _, _, names := batchedStreams(t, "w", streams, calls, service.NewLoggerFromSlog(slog.New(slog.NewTextHandler(&logs, nil))))
	var got streamLog
	go ackInto(t.Context(), c, &got)
	require.Eventually(t, func() bool {
		for _, n := range names {
			if n, _ := got.count(n); n < 10 {
				return false
			}
		}
		return true
	}, 10*time.Second, 20*time.Millisecond, "every stream is read")

	calls.mu.Lock()
	calls.roundsDown = errors.New("reading the balancing rounds of 6 streams: EOF")
	calls.mu.Unlock()
	const periods = 10
	time.Sleep(periods * cfg.RebalancePeriod) // counting log lines over a stretch of time
	calls.mu.Lock()
	calls.roundsDown = nil
	calls.mu.Unlock()
	warned := strings.Count(logs.String(), "Reading the balancing round's state failed")
	assert.GreaterOrEqual(t, warned, 1, "the failure is logged")
	assert.LessOrEqual(t, warned, periods+1, "once a balancing period, not once for each of the %d streams", streams)
}

// batchedStreams starts instance "a" reading streams one-shard streams
// "<prefix>-<i>" of 10 records each, every store a batchCheckStore
// counting into calls; it is closed when the test ends.
func batchedStreams(t *testing.T, prefix string, streams int, calls *groupCalls, log *service.Logger) (*Consumer, consumer.Config, map[string]*batchCheckStore, func(string) consumer.Store, []string) {
	t.Helper()
	api := newStreamsAPI()
	by := map[string]*batchCheckStore{}
	var mu sync.Mutex
	storeOf := func(id string) consumer.Store {
		mu.Lock()
		defer mu.Unlock()
		if by[id] == nil {
			by[id] = &batchCheckStore{Store: consumertest.NewStore(time.Second), id: id, calls: calls}
		}
		return by[id]
	}
	var names []string
	for i := range streams {
		name := fmt.Sprintf("%s-%d", prefix, i)
		names = append(names, name)
		api.create(name, 1, 10, time.Unix(1_700_000_000, 0))
	}
	cfg := testConfig()
	cfg.Streams, cfg.InstanceID = names, "a"
	c, err := New(cfg, api, storeOf, log, nil)
	require.NoError(t, err)
	require.NoError(t, c.Start(t.Context()))
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		_ = c.Close(ctx)
	})
	return c, cfg, by, storeOf, names
}
