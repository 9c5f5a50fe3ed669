package coordinator

import (
	"context"
	"fmt"
	"net"
	"os"
	"slices"
	"sync/atomic"
	"syscall"
	"testing"

	"github.com/stretchr/testify/assert"

	"github.com/connect-kinesis/connect-kinesis/internal/consumer"
	"github.com/connect-kinesis/connect-kinesis/internal/consumer/consumertest"
)

// batchedHandoffStore is the fake store with a batched hand-off request,
// counting its calls.
type batchedHandoffStore struct {
	*consumertest.Store
	calls, single atomic.Int64
}

func (s *batchedHandoffStore) RequestHandoffs(ctx context.Context, shards []string, requester string) error {
	s.calls.Add(1)
	for _, sh := range shards {
		if err := s.Store.RequestHandoff(ctx, sh, requester); err != nil {
			return err
		}
	}
	return nil
}

func (s *batchedHandoffStore) RequestHandoff(ctx context.Context, shard, requester string) error {
	s.single.Add(1)
	return s.Store.RequestHandoff(ctx, shard, requester)
}

// TestAMemberShortOfItsShareAsksForItInOneCall guards the balancing of
// issue 61's 10,000-shard start: a member that joined late asks for its
// whole shortfall, and one store call a shard let the round's deadline (a
// third of lease.period) pass after a few dozen on a loaded Redis ("Requesting
// hand-off of shard … context deadline exceeded", 58 times in one run), so
// the last members took minutes to reach their share. With a store that
// batches, the shortfall is one call.
func TestAMemberShortOfItsShareAsksForItInOneCall(t *testing.T) {
	t.Parallel()
	cfg := testConfig()
	st := &batchedHandoffStore{Store: consumertest.NewStore(cfg.LeasePeriod)}
	// The store behind the forget watch, as open.go wraps every store: the
	// watch has no batched request of its own.
	co := &coordinator{c: &Consumer{owner: "me", cfg: cfg, metrics: consumer.NewMetrics(nil)}, store: forgetWatch{Store: st, forgot: func() {}}, readers: map[string]shardReader{}}
	leases := map[string]consumer.LeaseState{}
	var ready []string
	for i := range 300 {
		id := fmt.Sprintf("shardId-%012d", i)
		ready = append(ready, id)
		owner := "x"
		if i >= 200 {
			owner = "y"
		}
		leases[id] = consumer.LeaseState{Lease: consumer.Lease{Shard: id, Owner: owner}}
	}
	slices.Sort(ready)
	// x holds 200 and y 100 of a share of 100 each: x is asked for its
	// 100 above share.
	asked := co.askForHandOff(t.Context(), leases, ready, []string{"me", "x", "y"}, 300, map[string]int{"x": 200, "y": 100}, 100)
	assert.Equal(t, 100, asked)
	assert.Equal(t, int64(1), st.calls.Load(), "the whole shortfall in one call")
	assert.Zero(t, st.single.Load())
	st.Mu.Lock()
	defer st.Mu.Unlock()
	n := 0
	for id, req := range st.Handoff {
		assert.Equal(t, "me", req)
		assert.Equal(t, "x", leases[id].Owner, "only the member above its share is asked")
		n++
	}
	assert.Equal(t, 100, n)
}

// failingHandoffStore is the fake store whose batched hand-off request
// fails with err, after recording the requests when landed is set (a call
// whose script ran but whose answer did not arrive in time).
type failingHandoffStore struct {
	*consumertest.Store
	err    error
	landed bool
}

func (s *failingHandoffStore) RequestHandoffs(ctx context.Context, shards []string, requester string) error {
	if s.landed {
		for _, sh := range shards {
			_ = s.Store.RequestHandoff(ctx, sh, requester)
		}
	}
	return s.err
}

// TestATimedOutHandoffRequestStillCountsAgainstTheShortfall guards the
// count askForHandOff returns when the batched request timed out: the
// script may have run, so the holders may hand over every shard of it, and
// a count of 0 let the consumer's other streams (tally.go's pending asks)
// ask for the same shortfall again, shards their holders then release and
// nobody's quota takes. A call refused outright asked for nothing.
func TestATimedOutHandoffRequestStillCountsAgainstTheShortfall(t *testing.T) {
	t.Parallel()
	cases := []struct {
		name   string
		err    error
		landed bool
		want   int
	}{
		{"timed out after the script ran", fmt.Errorf("requesting hand-off of 100 shards: %w", context.DeadlineExceeded), true, 100},
		{"read timeout after the script ran", fmt.Errorf("requesting hand-off of 100 shards: %w", &net.OpError{Op: "read", Net: "tcp", Err: os.ErrDeadlineExceeded}), true, 100},
		{"connection refused", fmt.Errorf("requesting hand-off of 100 shards: %w", &net.OpError{Op: "dial", Net: "tcp", Err: syscall.ECONNREFUSED}), false, 0},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			cfg := testConfig()
			st := &failingHandoffStore{Store: consumertest.NewStore(cfg.LeasePeriod), err: tc.err, landed: tc.landed}
			co := &coordinator{c: &Consumer{owner: "me", cfg: cfg, metrics: consumer.NewMetrics(nil)}, store: st, readers: map[string]shardReader{}}
			leases := map[string]consumer.LeaseState{}
			var ready []string
			for i := range 200 {
				id := fmt.Sprintf("shardId-%012d", i)
				ready = append(ready, id)
				leases[id] = consumer.LeaseState{Lease: consumer.Lease{Shard: id, Owner: "x"}}
			}
			slices.Sort(ready)
			asked := co.askForHandOff(t.Context(), leases, ready, []string{"me", "x"}, 200, map[string]int{"x": 200}, 100)
			st.Mu.Lock()
			standing := len(st.Handoff)
			st.Mu.Unlock()
			assert.Equal(t, tc.want, standing)
			assert.Equal(t, standing, asked, "the count asked is what the holders may hand over")
		})
	}
}
