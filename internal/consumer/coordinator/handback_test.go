package coordinator

import (
	"context"
	"sync/atomic"
	"testing"
	"time"

	"github.com/connect-kinesis/connect-kinesis/internal/consumer"
	"github.com/connect-kinesis/connect-kinesis/internal/consumer/consumertest"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// commitDownStore is a consumertest.Store whose commits fail while down is set, and
// which counts releases.
type commitDownStore struct {
	*consumertest.Store
	down     atomic.Bool
	releases atomic.Int64
}

func (s *commitDownStore) Commit(ctx context.Context, l consumer.Lease, p consumer.Position) error {
	if s.down.Load() {
		return errDown
	}
	return s.Store.Commit(ctx, l, p)
}

func (s *commitDownStore) Release(ctx context.Context, l consumer.Lease) error {
	s.releases.Add(1)
	return s.Store.Release(ctx, l)
}

// A hand-back whose final commit fails is retried within the shutdown's
// time and releases only once the commit landed: releasing first would let
// the next owner start before the records acked since the last commit.
func TestHandBackRetriesTheFinalCommitBeforeReleasing(t *testing.T) {
	api := consumertest.NewKinesis()
	const shard = "shardId-000000000000"
	api.Add(shard, &consumertest.KinesisShard{Records: 5})
	cfg := testConfig()
	st := &commitDownStore{Store: consumertest.NewStore(cfg.LeasePeriod)}
	a := startConsumer(t, cfg, api, st)
	var b *consumer.Batch
	select {
	case b = <-a.Batches():
	case <-time.After(10 * time.Second):
		t.Fatal("no batch delivered")
	}
	st.down.Store(true)
	b.Ack(nil)
	closed := make(chan error, 1)
	go func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		closed <- a.Close(ctx)
	}()
	// The store answers again a while after the final commit first failed.
	time.Sleep(300 * time.Millisecond)
	assert.Zero(t, st.releases.Load(), "released before the final commit landed")
	st.down.Store(false)
	require.NoError(t, <-closed)

	p, ok, err := st.Checkpoint(t.Context(), shard)
	require.NoError(t, err)
	require.True(t, ok, "the final commit never landed")
	assert.Equal(t, consumertest.SeqOf(shard, 5), p.Sequence)
	assert.EqualValues(t, 1, st.releases.Load(), "released once the commit landed")
}

// With the store unreachable at shutdown, the stop ends within its time and
// the lease is left to expire rather than released over an uncommitted
// position.
func TestShutdownWithTheStoreGoneEndsInTimeAndReleasesNothing(t *testing.T) {
	api := consumertest.NewKinesis()
	const shard = "shardId-000000000000"
	api.Add(shard, &consumertest.KinesisShard{Records: 5})
	cfg := testConfig()
	cfg.Backoff.MaxElapsedTime = time.Minute
	st := &commitDownStore{Store: consumertest.NewStore(cfg.LeasePeriod)}
	a := startConsumer(t, cfg, api, st)
	var b *consumer.Batch
	select {
	case b = <-a.Batches():
	case <-time.After(10 * time.Second):
		t.Fatal("no batch delivered")
	}
	st.down.Store(true)
	b.Ack(nil)
	ctx, cancel := context.WithTimeout(t.Context(), 500*time.Millisecond)
	defer cancel()
	began := time.Now()
	_ = a.Close(ctx)
	assert.Less(t, time.Since(began), 3*time.Second, "Close outlived its time")
	assert.Zero(t, st.releases.Load(), "released a lease whose final commit never landed")
	_, ok, err := st.Checkpoint(t.Context(), shard)
	require.NoError(t, err)
	assert.False(t, ok)
}

// The final commit of a hand-back is retried for as long as the shutdown
// allows, past backoff.max_elapsed_time: giving up there would leave the
// lease to expire and the next owner to read again every record acked
// since the last commit. The next owner takes the shard only after the
// final commit landed, so it delivers none of them.
func TestHandBackRetriesTheFinalCommitPastMaxElapsedTimeAndTheNextOwnerDuplicatesNothing(t *testing.T) {
	t.Parallel()
	api := consumertest.NewKinesis()
	const shard = "shardId-000000000000"
	api.Add(shard, &consumertest.KinesisShard{Records: 5})
	cfg := testConfig()
	cfg.Backoff.MaxElapsedTime = 200 * time.Millisecond
	st := &commitDownStore{Store: consumertest.NewStore(cfg.LeasePeriod)}
	a := startConsumer(t, cfg, api, st)
	var b *consumer.Batch
	select {
	case b = <-a.Batches():
	case <-time.After(10 * time.Second):
		t.Fatal("no batch delivered")
	}
	require.Len(t, b.Records, 5)
	bc := startConsumer(t, cfg, api, st)
	st.down.Store(true)
	b.Ack(nil)
	closed := make(chan error, 1)
	go func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		closed <- a.Close(ctx)
	}()
	// Down for several max_elapsed_time and lease periods.
	time.Sleep(1500 * time.Millisecond)
	st.down.Store(false)
	require.NoError(t, <-closed)

	p, ok, err := st.Checkpoint(t.Context(), shard)
	require.NoError(t, err)
	require.True(t, ok, "the final commit never landed")
	assert.Equal(t, consumertest.SeqOf(shard, 5), p.Sequence)
	assert.EqualValues(t, 1, st.releases.Load(), "released once the commit landed")
	select {
	case dup := <-bc.Batches():
		t.Fatalf("the next owner delivered again %d records acked before the hand-back", len(dup.Records))
	case <-time.After(time.Second):
	}
}

// refused is a batch's reader side that refuses it: its lease was lost.
type refused struct{}

func (refused) Ack(error)   {}
func (refused) Admit() bool { return false }

// Next hands over no batch that its reader refuses (a lost lease, or one
// past its local deadline): it waits for the next one.
func TestNextDropsABatchOfALostReader(t *testing.T) {
	c := &Consumer{out: make(chan *consumer.Batch)}
	go func() {
		b := consumer.MakeBatch("s", "shardId-000000000000", []consumer.Record{{Sequence: "1"}}, 0, refused{})
		select {
		case c.out <- &b:
		case <-t.Context().Done():
		}
	}()
	ctx, cancel := context.WithTimeout(t.Context(), 300*time.Millisecond)
	defer cancel()
	b, err := c.Next(ctx)
	assert.Nil(t, b, "a batch of a lost lease was handed over")
	assert.ErrorIs(t, err, context.DeadlineExceeded)
}
