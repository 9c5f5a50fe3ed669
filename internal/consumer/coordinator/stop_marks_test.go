package coordinator

import (
	"context"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/connect-kinesis/connect-kinesis/internal/consumer"
	"github.com/connect-kinesis/connect-kinesis/internal/consumer/consumertest"
)

// marksStore is a consumertest.Store that keeps redelivery marks through
// marker, and whose releases fail while down is set.
type marksStore struct {
	*consumertest.Store
	down   atomic.Bool
	marker *writeBackMarker
}

func (s *marksStore) Release(ctx context.Context, l consumer.Lease) error {
	if s.down.Load() {
		return errDown
	}
	return s.Store.Release(ctx, l)
}

func (s *marksStore) Marks(context.Context, string) consumer.Marker { return s.marker }

// writeBackMarker covers every position at once and counts the write-backs
// tried and landed; they fail while down is set.
type writeBackMarker struct {
	down           *atomic.Bool
	tries, written atomic.Int64
}

func (m *writeBackMarker) Ask(consumer.Lease, consumer.Position) <-chan error {
	ch := make(chan error, 1)
	ch <- nil
	return ch
}
func (m *writeBackMarker) Forget(string) {}

func (m *writeBackMarker) Found(consumer.Lease) consumer.Position { return consumer.Position{} }
func (m *writeBackMarker) WriteBack(ctx context.Context) error {
	m.tries.Add(1)
	if err := ctx.Err(); err != nil {
		return err // as a Redis call made with an ended context
	}
	if m.down.Load() {
		return errDown
	}
	m.written.Add(1)
	return nil
}

// oneShardBatch starts a consumer over st reading one shard of five records
// and returns it with the first batch delivered.
func oneShardBatch(t *testing.T, cfg consumer.Config, st consumer.Store) (*Consumer, *consumer.Batch) {
	t.Helper()
	api := consumertest.NewKinesis()
	api.Add("shardId-000000000000", &consumertest.KinesisShard{Records: 5})
	a := startConsumer(t, cfg, api, st)
	select {
	case b := <-a.Batches():
		return a, b
	case <-time.After(10 * time.Second):
		t.Fatal("no batch delivered")
		return nil, nil
	}
}

func newMarksStore(period time.Duration) *marksStore {
	st := &marksStore{Store: consumertest.NewStore(period)}
	st.marker = &writeBackMarker{down: &st.down}
	return st
}

// A stream whose stop leaves a lease to lapse (the release did not land
// before the reader gave up) writes its redelivery marks back, retried
// until the store answers within the stop's time: a store that forgot the
// group while the instance was stopping gets them back, which the
// instances still running cannot do (they know only their own marks). The
// reader here gives up its release after backoff.max_elapsed_time, as a
// hand-off begun before the stop gives up its final commit after
// lease.handoff_timeout (soak seed 9 with efo: y2's soak-kpl shard 5,
// Redis back empty 5 s after it went down, the shard then delivered again
// unmarked).
func TestAStopThatLeavesALeaseToLapseWritesTheMarksBack(t *testing.T) {
	t.Parallel()
	cfg := testConfig()
	cfg.Backoff.MaxElapsedTime = 200 * time.Millisecond
	st := newMarksStore(cfg.LeasePeriod)
	a, _ := oneShardBatch(t, cfg, st) // delivered, never acked
	st.down.Store(true)
	closed := make(chan error, 1)
	began := time.Now()
	go func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		closed <- a.Close(ctx)
	}()
	require.Eventually(t, func() bool { return st.marker.tries.Load() >= 2 }, 5*time.Second, 10*time.Millisecond,
		"the stop does not retry writing the marks back while the store is down")
	assert.Zero(t, st.marker.written.Load())
	st.down.Store(false)
	select {
	case <-closed:
	case <-time.After(5 * time.Second):
		t.Fatal("the stop did not end once the marks were written back")
	}
	assert.EqualValues(t, 1, st.marker.written.Load(), "the marks were written back once")
	assert.Less(t, time.Since(began), 8*time.Second, "the stop waited past the write that landed")
}

// A stop that committed and released every shard writes no mark back: the
// store holds them, and the next owner's take reads them.
func TestAStopThatReleasesEveryShardWritesNoMarkBack(t *testing.T) {
	t.Parallel()
	cfg := testConfig()
	st := newMarksStore(cfg.LeasePeriod)
	a, b := oneShardBatch(t, cfg, st)
	b.Ack(nil)
	ctx, cancel := context.WithTimeout(t.Context(), 5*time.Second)
	defer cancel()
	require.NoError(t, a.Close(ctx))
	assert.Zero(t, st.marker.tries.Load())
}

// refusingCommitsStore is a marksStore whose commits fail while
// refuseCommits is set; its marker writes land.
type refusingCommitsStore struct {
	*marksStore
	refuseCommits atomic.Bool
}

func (s *refusingCommitsStore) Commit(ctx context.Context, l consumer.Lease, p consumer.Position) error {
	if s.refuseCommits.Load() {
		return errDown
	}
	return s.marksStore.Commit(ctx, l, p)
}

// A stop whose final commit is retried to the end of the stop's time (at
// shutdown it is retried for as long as the stop lasts) still writes the
// marks back: the readers are ended a little before the stop's deadline,
// so the write-back has time left. It used to get an expired context and
// fail at once (soak seed 10 with efo: y2, "Could not write back how far
// this instance delivered the shards it left to lapse ... before the
// stop's time was up").
func TestAStopWhoseFinalCommitTakesAllItsTimeStillWritesTheMarksBack(t *testing.T) {
	t.Parallel()
	cfg := testConfig()
	cfg.HandoffTimeout = 200 * time.Millisecond
	st := &refusingCommitsStore{marksStore: newMarksStore(cfg.LeasePeriod)}
	a, b := oneShardBatch(t, cfg, st)
	st.refuseCommits.Store(true)
	b.Ack(nil) // acked, and its commit never lands
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Second)
	defer cancel()
	_ = a.Close(ctx)
	assert.EqualValues(t, 1, st.marker.written.Load(),
		"the marks of the shard left to lapse were not written back within the stop's time (%d tries)", st.marker.tries.Load())
}
