package coordinator

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/connect-kinesis/connect-kinesis/internal/consumer"
	"github.com/connect-kinesis/connect-kinesis/internal/consumer/consumertest"
)

var errCut = errors.New("i/o timeout (cut off from Redis)")

// cutStore is a consumertest.Store that one instance can be cut off from
// (every call fails), and that can forget the group as a Redis restarted
// empty does: until a re-seed, calls say ErrStoreForgot.
type cutStore struct {
	*consumertest.Store
	mu        sync.Mutex
	cut       bool
	forgotten bool
	reseeded  time.Time
}

func (s *cutStore) state() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	switch {
	case s.cut:
		return errCut
	case s.forgotten:
		return consumer.ErrStoreForgot
	}
	return nil
}

func (s *cutStore) set(cut, forgotten bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.cut, s.forgotten = cut, forgotten
}

func (s *cutStore) CheckGroup(context.Context) error { return s.state() }

func (s *cutStore) Heartbeat(ctx context.Context, m string) error {
	if err := s.state(); err != nil {
		return err
	}
	return s.Store.Heartbeat(ctx, m)
}

func (s *cutStore) RenewAll(ctx context.Context, owner string, ls []consumer.Lease) ([]consumer.Lease, []string, error) {
	if err := s.state(); err != nil {
		return nil, nil, err
	}
	return s.Store.RenewAll(ctx, owner, ls)
}

func (s *cutStore) Commit(ctx context.Context, l consumer.Lease, p consumer.Position) error {
	if err := s.state(); err != nil {
		return err
	}
	return s.Store.Commit(ctx, l, p)
}

func (s *cutStore) Reseed(ctx context.Context, seed consumer.Seed) (consumer.Reseeded, error) {
	s.mu.Lock()
	if s.cut {
		s.mu.Unlock()
		return consumer.Reseeded{}, errCut
	}
	s.forgotten = false
	s.reseeded = time.Now()
	s.mu.Unlock()
	return s.Store.Reseed(ctx, seed)
}

func (s *cutStore) reseededAt() time.Time {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.reseeded
}

// An instance cut off from Redis for longer than its lease cannot know it
// still holds its shard: another instance may have taken it under a newer
// token and read on. If Redis then forgets, the instance re-seeds that
// lease (possibly first, the newer owner being paused), but its reader
// must not read on before the newer owner has had a lease period to
// re-seed its own: the newer token wins the shard back and the reader
// stops having delivered nothing (soak seed 3, 1 h: a5 re-seeded first and
// delivered c3's records again, without the redelivery mark). When nobody
// claims the shard (Redis was down for everyone), the reader goes on after
// that lease period from where it was, with nothing read twice.
func TestReseededLeasePastItsDeadlineWaitsForANewerOwner(t *testing.T) {
	for _, tc := range []struct {
		name  string
		taken bool // another instance took the shard while this one was cut off
	}{
		{"another instance took it meanwhile", true},
		{"nobody took it", false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			api := consumertest.NewKinesis()
			const shard = "shardId-000000000000"
			api.Add(shard, &consumertest.KinesisShard{Records: 100})
			cfg := testConfig()
			cfg.Limit = 10
			st := &cutStore{Store: consumertest.NewStore(cfg.LeasePeriod)}
			c := startConsumer(t, cfg, api, st)
			ctx, cancel := context.WithTimeout(t.Context(), 20*time.Second)
			defer cancel()

			var got []string
			b, err := c.Next(ctx)
			require.NoError(t, err)
			r := readerOf(c, b)
			for _, rec := range b.Records {
				got = append(got, string(rec.Data))
			}
			b.Ack(nil)

			// Cut off for longer than the lease: the local deadline passes.
			st.set(true, false)
			require.Eventually(t, func() bool { return !r.LeaseLive() }, 5*time.Second, 10*time.Millisecond)
			st.Mu.Lock()
			if tc.taken {
				st.Tokens++
				st.LeaseMap[shard] = consumer.Lease{Shard: shard, Owner: "newer", Token: st.Tokens, ExpiresAt: time.Now().Add(time.Hour)}
			}
			// Redis comes back empty; the newer owner is paused.
			st.LeaseMap, st.Ckpt = map[string]consumer.Lease{}, map[string]consumer.Position{}
			st.Mu.Unlock()
			st.set(false, true)
			require.Eventually(t, func() bool { return !st.reseededAt().IsZero() }, 5*time.Second, 10*time.Millisecond, "the instance re-seeds")
			if tc.taken {
				// For half a lease the newer owner is still paused: the
				// instance that re-seeded first hands nothing over.
				wait, cancelWait := context.WithTimeout(ctx, cfg.LeasePeriod/2)
				extra, err := c.Next(wait)
				cancelWait()
				if err == nil {
					t.Fatalf("a batch starting at %s was delivered after the re-seed, before the newer owner could claim the shard", extra.Records[0].Sequence)
				}
				// Then it resumes and re-seeds: its newer token wins the
				// shard back, and the reader stops.
				st.Mu.Lock()
				st.Tokens++
				st.LeaseMap[shard] = consumer.Lease{Shard: shard, Owner: "newer", Token: st.Tokens, ExpiresAt: time.Now().Add(time.Hour)}
				st.Mu.Unlock()
				select {
				case <-r.Done():
				case <-ctx.Done():
					t.Fatal("the reader did not stop after the newer owner re-seeded its lease")
				}
				assert.True(t, r.Lost())
				return
			}
			for len(got) < 100 {
				b, err := c.Next(ctx)
				require.NoError(t, err, "only %d of 100 records delivered", len(got))
				if len(got) == 10 {
					assert.GreaterOrEqual(t, time.Since(st.reseededAt()), cfg.LeasePeriod-50*time.Millisecond,
						"the reader waited a lease period after the re-seed")
				}
				for _, rec := range b.Records {
					got = append(got, string(rec.Data))
				}
				b.Ack(nil)
			}
			for i, rec := range got {
				assert.Equal(t, shard+"/"+itoa(i+1), rec, "every record once, in order")
			}
		})
	}
}
