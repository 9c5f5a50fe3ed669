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

// shortDeadlineStore hands out leases whose local deadline is only window
// after each acquisition or renewal, though the store keeps them for the
// whole period: between renewals the reader spends most of its time past
// its deadline, as a process that was paused would. It records every window
// it granted.
type shortDeadlineStore struct {
	*consumertest.Store
	window time.Duration

	mu      sync.Mutex
	granted [][2]time.Time
}

func (s *shortDeadlineStore) grant(l consumer.Lease) consumer.Lease {
	now := time.Now()
	l.Deadline = now.Add(s.window)
	s.mu.Lock()
	s.granted = append(s.granted, [2]time.Time{now, l.Deadline})
	s.mu.Unlock()
	return l
}

func (s *shortDeadlineStore) Acquire(ctx context.Context, shard, owner string) (consumer.Take, error) {
	t, err := s.Store.Acquire(ctx, shard, owner)
	if err != nil {
		return t, err
	}
	t.Lease = s.grant(t.Lease)
	return t, nil
}

func (s *shortDeadlineStore) RenewAll(ctx context.Context, owner string, ls []consumer.Lease) ([]consumer.Lease, []string, error) {
	renewed, lost, err := s.Store.RenewAll(ctx, owner, ls)
	for i := range renewed {
		renewed[i] = s.grant(renewed[i])
	}
	return renewed, lost, err
}

// within reports whether t falls inside a granted window, allowing slack
// for the moment between the reader's check and the call it guards.
func (s *shortDeadlineStore) within(t time.Time, slack time.Duration) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, w := range s.granted {
		if !t.Before(w[0]) && t.Before(w[1].Add(slack)) {
			return true
		}
	}
	return false
}

// A reader past its lease's local deadline neither calls GetRecords nor
// hands a batch over until a renewal confirms the lease; then it goes on,
// and nothing is lost.
func TestReaderNeitherFetchesNorDeliversPastTheLeaseDeadline(t *testing.T) {
	api := consumertest.NewKinesis()
	const shard = "shardId-000000000000"
	api.Add(shard, &consumertest.KinesisShard{Records: 100})
	cfg := testConfig() // renewals every 200ms
	cfg.Limit = 5       // 20 GetRecords calls
	st := &shortDeadlineStore{Store: consumertest.NewStore(cfg.LeasePeriod), window: 60 * time.Millisecond}
	c := startConsumer(t, cfg, api, st)

	const slack = 30 * time.Millisecond
	var got []string
	var late []time.Duration
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	defer cancel()
	for len(got) < 100 {
		b, err := c.Next(ctx)
		require.NoError(t, err, "only %d of 100 records delivered", len(got))
		if at := time.Now(); !st.within(at, slack) {
			late = append(late, at.Sub(readerOf(c, b).Lease().Deadline))
		}
		for _, r := range b.Records {
			got = append(got, string(r.Data))
		}
		b.Ack(nil)
	}
	assert.Empty(t, late, "batches handed over past the lease deadline (by how much)")
	for i, r := range got {
		assert.Equal(t, shard+"/"+itoa(i+1), r, "every record, in order")
	}
	calls := api.CallTimes(shard)
	require.NotEmpty(t, calls)
	outside := 0
	for _, at := range calls {
		if !st.within(at, slack) {
			outside++
		}
	}
	assert.Zero(t, outside, "GetRecords calls made past the lease deadline, of %d", len(calls))
}

// A reader past its deadline whose renewal then finds the lease lost
// delivers nothing more: the batch it fetched is dropped, not handed over.
func TestReaderPastItsDeadlineStopsWhenTheRenewalFindsTheLeaseLost(t *testing.T) {
	api := consumertest.NewKinesis()
	const shard = "shardId-000000000000"
	api.Add(shard, &consumertest.KinesisShard{Records: 30})
	cfg := testConfig()
	st := &shortDeadlineStore{Store: consumertest.NewStore(cfg.LeasePeriod), window: 60 * time.Millisecond}
	c := startConsumer(t, cfg, api, st)
	ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
	defer cancel()
	b, err := c.Next(ctx)
	require.NoError(t, err)
	r := readerOf(c, b)
	// The next renewal finds the lease taken; acking lets the reader fetch
	// its next batch, which it must not hand over.
	st.Mu.Lock()
	st.LoseOnRenew[shard] = true
	st.Mu.Unlock()
	b.Ack(nil)
	select {
	case <-r.Done():
	case <-ctx.Done():
		t.Fatal("the reader did not stop after its lease was lost")
	}
	require.True(t, r.Lost())
	// The reader has ended: a batch it handed over would be waiting now.
	select {
	case extra := <-c.Batches():
		t.Fatalf("a batch starting at %s was delivered after the lease was lost", extra.Records[0].Sequence)
	default:
	}
}
