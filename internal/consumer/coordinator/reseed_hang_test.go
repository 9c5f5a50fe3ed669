package coordinator

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/connect-kinesis/connect-kinesis/internal/consumer"
	"github.com/connect-kinesis/connect-kinesis/internal/consumer/consumertest"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// hangingRenewStore is a consumertest.Store that forgets the group at the moment
// its first renewal is sent, and whose first renewal hangs until its ctx
// ends (a half-open connection after a failover); later calls answer. It
// checks the group record like the Redis store.
type hangingRenewStore struct {
	*consumertest.Store
	mu            sync.Mutex
	renewals      int
	forgotten     bool
	hungReturned  time.Time
	reseededAt    time.Time
	hangingRenews chan struct{}
}

func (s *hangingRenewStore) CheckGroup(context.Context) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.forgotten {
		return consumer.ErrStoreForgot
	}
	return nil
}

func (s *hangingRenewStore) RenewAll(ctx context.Context, owner string, ls []consumer.Lease) ([]consumer.Lease, []string, error) {
	s.mu.Lock()
	s.renewals++
	first, forgotten := s.renewals == 1, s.forgotten
	if first {
		s.forgotten = true
	}
	s.mu.Unlock()
	if first {
		close(s.hangingRenews)
		<-ctx.Done()
		s.mu.Lock()
		s.hungReturned = time.Now()
		s.mu.Unlock()
		return nil, nil, ctx.Err()
	}
	if forgotten {
		return nil, nil, consumer.ErrStoreForgot
	}
	return s.Store.RenewAll(ctx, owner, ls)
}

func (s *hangingRenewStore) Reseed(ctx context.Context, seed consumer.Seed) (consumer.Reseeded, error) {
	s.mu.Lock()
	if s.reseededAt.IsZero() {
		s.reseededAt = time.Now()
	}
	s.forgotten = false
	s.mu.Unlock()
	return s.Store.Reseed(ctx, seed)
}

// The group check that finds the store forgot wakes the re-seed at once,
// not after a renewal that hangs: each renewal may take a sixth of the
// lease period, and the progress published after it as long again (3.3 s
// at the default lease), more than a newcomer's 2 s wait (issue 33, item
// 4). Here the renewal that was out when the store forgot hangs for its
// whole bound (3 s of an 18 s lease): the re-seed must come before it
// returns. Before the fix the re-seed came after it.
func TestReseedDoesNotWaitBehindAHangingRenewal(t *testing.T) {
	t.Parallel()
	api := consumertest.NewKinesis()
	api.Add("shardId-000000000000", &consumertest.KinesisShard{Records: 5})
	cfg := testConfig()
	cfg.LeasePeriod = 18 * time.Second
	store := &hangingRenewStore{Store: consumertest.NewStore(cfg.LeasePeriod), hangingRenews: make(chan struct{})}
	c, err := New(cfg, api, func(string) consumer.Store { return store }, nil, nil)
	require.NoError(t, err)
	require.NoError(t, c.Start(t.Context()))
	t.Cleanup(func() { _ = c.Close(t.Context()) })
	go func() {
		for b := range c.Batches() {
			b.Ack(nil)
		}
	}()
	select {
	case <-store.hangingRenews:
	case <-time.After(30 * time.Second):
		t.Fatal("no renewal was sent")
	}
	require.Eventually(t, func() bool {
		store.mu.Lock()
		defer store.mu.Unlock()
		return !store.reseededAt.IsZero() && !store.hungReturned.IsZero()
	}, 20*time.Second, 20*time.Millisecond, "the store is re-seeded and the hanging renewal ends")
	store.mu.Lock()
	defer store.mu.Unlock()
	assert.True(t, store.reseededAt.Before(store.hungReturned),
		"re-seeded at %v, the hanging renewal returned at %v", store.reseededAt.Format(time.StampMilli), store.hungReturned.Format(time.StampMilli))
}
