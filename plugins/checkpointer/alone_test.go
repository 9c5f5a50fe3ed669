package checkpointer

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"

	"github.com/connect-kinesis/connect-kinesis/internal/consumer"
	"github.com/connect-kinesis/connect-kinesis/internal/consumer/consumertest"
	"github.com/connect-kinesis/connect-kinesis/internal/testenv"
)

// barrierStore is a store of another kind (as a Cluster's streams are to a
// batched call: each makes its own) whose fixed-pace calls return only
// once every such store's call has begun, or the bound ends.
type barrierStore struct {
	*consumertest.Store
	all *sync.WaitGroup
	in  chan struct{}
}

func (b *barrierStore) wait(ctx context.Context) error {
	b.all.Done()
	select {
	case <-b.in:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

func (b *barrierStore) RenewAll(ctx context.Context, owner string, ls []consumer.Lease) ([]consumer.Lease, []string, error) {
	return ls, nil, b.wait(ctx)
}
func (b *barrierStore) Heartbeat(ctx context.Context, _ string) error { return b.wait(ctx) }
func (b *barrierStore) PublishProgress(ctx context.Context, _ string, _ map[string]consumer.Progress) error {
	return b.wait(ctx)
}
func (b *barrierStore) CheckGroup(ctx context.Context) error { return b.wait(ctx) }

// The streams a batched call cannot cover each make their own call under
// the caller's one bound. Made one after another, a call that stalls
// pushed every stream after it past the bound (in a Cluster every stream
// is such a stream). Here each store's call returns only once all of them
// have begun, so made one after another every call but the last would end
// at the bound with an error; made at once, none does.
func TestIntegrationStreamsCalledAloneAreCalledAtOnce(t *testing.T) {
	t.Parallel()
	r := testenv.NewRedis(t)
	s := joinedStore(t, backend{url: r.URL(), kind: KindSimple})
	const n = 6
	own := mustAcquire(t, s, "shard-0")
	calls := map[string]func(ctx context.Context, stores []consumer.Store) []error{
		"RenewStreams": func(ctx context.Context, stores []consumer.Store) []error {
			leases := make([][]consumer.Lease, len(stores))
			for i := range leases {
				leases[i] = []consumer.Lease{own}
			}
			var errs []error
			for _, r := range s.RenewStreams(ctx, "a", stores, leases) {
				errs = append(errs, r.Err)
			}
			return errs
		},
		"HeartbeatAll": func(ctx context.Context, stores []consumer.Store) []error { return s.HeartbeatAll(ctx, "a", stores) },
		"PublishProgressAll": func(ctx context.Context, stores []consumer.Store) []error {
			ps := make([]map[string]consumer.Progress, len(stores))
			for i := range ps {
				ps[i] = map[string]consumer.Progress{"shard-0": {}}
			}
			return s.PublishProgressAll(ctx, "a", stores, ps)
		},
		"CheckGroups": func(ctx context.Context, stores []consumer.Store) []error { return s.CheckGroups(ctx, stores) },
	}
	for name, call := range calls {
		t.Run(name, func(t *testing.T) {
			var all sync.WaitGroup
			all.Add(n)
			in := make(chan struct{})
			go func() { all.Wait(); close(in) }()
			stores := []consumer.Store{s} // batched with itself
			for range n {
				stores = append(stores, &barrierStore{Store: consumertest.NewStore(30 * time.Second), all: &all, in: in})
			}
			ctx, cancel := context.WithTimeout(t.Context(), 5*time.Second)
			defer cancel()
			errs := call(ctx, stores)
			assert.Len(t, errs, n+1)
			for i, err := range errs {
				assert.NoError(t, err, "stream %d", i)
			}
		})
	}
}
