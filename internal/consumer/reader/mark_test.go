package reader

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/service/kinesis/types"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/connect-kinesis/connect-kinesis/internal/consumer"
	"github.com/connect-kinesis/connect-kinesis/internal/consumer/budget"
	"github.com/connect-kinesis/connect-kinesis/internal/consumer/consumertest"
	"github.com/connect-kinesis/connect-kinesis/internal/consumer/source"
)

// fenceOnce is a consumer.Marker whose first write is fenced (the lease
// named another owner for a moment) and whose later writes land; it keeps
// the positions asked.
type fenceOnce struct {
	mu     sync.Mutex
	asked  []consumer.Position
	fenced bool
}

func (f *fenceOnce) Ask(l consumer.Lease, p consumer.Position) <-chan error {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.asked = append(f.asked, p)
	ch := make(chan error, 1)
	if !f.fenced {
		f.fenced = true
		ch <- fmt.Errorf("storing how far shard %s was delivered (token %d): %w", l.Shard, l.Token, consumer.ErrLeaseLost)
		return ch
	}
	ch <- nil
	return ch
}

func (f *fenceOnce) Forget(string) {}

func (f *fenceOnce) Found(consumer.Lease) consumer.Position { return consumer.Position{} }

func (f *fenceOnce) WriteBack(context.Context) error { return nil }

// Records reach the pipeline only once a write of the redelivery mark
// covers them. A fenced write holds them, without ending the reader, until
// a renewal confirms the lease (a re-seed can win a shard back after a
// store came back empty); they are then delivered, and the reader is not
// counted lost.
func TestFencedMarkWaitsForTheCoordinatorsVerdict(t *testing.T) {
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	shard := nextShard()
	api := consumertest.NewKinesis()
	api.Add(shard, &consumertest.KinesisShard{Records: 5})
	store := consumertest.NewStore(time.Minute)
	take, err := store.Acquire(ctx, shard, "me")
	require.NoError(t, err)
	cfg := consumertest.Config()
	out := make(chan *consumer.Batch)
	st := testStream(ctx, &cfg, api, store, out)
	marker := &fenceOnce{}
	st.Marker = marker
	r := New(st, consumer.Shard{ID: shard}, take.Lease, source.Start{IterType: types.ShardIteratorTypeTrimHorizon})
	go r.Run()
	defer func() {
		cancel()
		<-r.Done()
	}()

	select {
	case b := <-out:
		t.Fatalf("a batch of %d records was handed over with its mark's write fenced", len(b.Records))
	case <-time.After(500 * time.Millisecond):
	}
	require.False(t, r.lost.Load(), "a fenced mark alone does not end the reader")

	r.LeaseRenewed(take.Lease)
	select {
	case b := <-out:
		require.True(t, b.Admit())
		assert.Len(t, b.Records, 5)
		b.Ack(nil)
	case <-time.After(5 * time.Second):
		t.Fatal("the batch was not handed over after the renewal")
	}
	marker.mu.Lock()
	defer marker.mu.Unlock()
	require.Len(t, marker.asked, 2, "asked once, and again after the renewal")
	assert.Equal(t, marker.asked[0], marker.asked[1])
}

// heldMarker answers no ask until release is closed; it keeps the
// positions asked.
type heldMarker struct {
	mu      sync.Mutex
	asked   []consumer.Position
	release chan struct{}
}

func (m *heldMarker) Ask(_ consumer.Lease, p consumer.Position) <-chan error {
	m.mu.Lock()
	m.asked = append(m.asked, p)
	m.mu.Unlock()
	ch := make(chan error, 1)
	go func() { <-m.release; ch <- nil }()
	return ch
}

func (m *heldMarker) Forget(string) {}

func (m *heldMarker) Found(consumer.Lease) consumer.Position { return consumer.Position{} }

func (m *heldMarker) WriteBack(context.Context) error { return nil }

// Guards the write-ahead mark asked as soon as an answer is in (issue 59,
// the mark's cost): it is asked once per answer, for the answer's last
// record, and the answer's records still wait for the write's answer
// before any of them goes to the pipeline.
func TestMarkAskedAsTheAnswerArrivesStillHoldsItsRecords(t *testing.T) {
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	shard := nextShard()
	api := consumertest.NewKinesis()
	api.Add(shard, &consumertest.KinesisShard{Records: 5})
	store := consumertest.NewStore(time.Minute)
	take, err := store.Acquire(ctx, shard, "me")
	require.NoError(t, err)
	cfg := consumertest.Config()
	out := make(chan *consumer.Batch)
	st := testStream(ctx, &cfg, api, store, out)
	marker := &heldMarker{release: make(chan struct{})}
	st.Marker = marker
	r := New(st, consumer.Shard{ID: shard}, take.Lease, source.Start{IterType: types.ShardIteratorTypeTrimHorizon})
	go r.Run()
	defer func() {
		cancel()
		<-r.Done()
	}()

	select {
	case b := <-out:
		t.Fatalf("a batch of %d records was handed over before its mark was written", len(b.Records))
	case <-time.After(300 * time.Millisecond):
	}
	close(marker.release)
	select {
	case b := <-out:
		require.True(t, b.Admit())
		require.Len(t, b.Records, 5)
		marker.mu.Lock()
		asked := slices.Clone(marker.asked)
		marker.mu.Unlock()
		require.Len(t, asked, 1, "one ask for the answer")
		assert.Equal(t, b.Records[4].Position(), asked[0], "the mark asked is the answer's last record")
		b.Ack(nil)
	case <-time.After(5 * time.Second):
		t.Fatal("the batch was not handed over once its mark was written")
	}
}

// fencedUntil is a consumer.Marker that fences every write under a token
// below ok and writes the others; onAsk, when set, runs inside each ask
// (before it is answered), so a test can act between an ask and the
// reader's wait for it.
type fencedUntil struct {
	mu    sync.Mutex
	ok    int64
	asked []consumer.Lease
	onAsk func(consumer.Lease)
}

func (f *fencedUntil) Ask(l consumer.Lease, _ consumer.Position) <-chan error {
	f.mu.Lock()
	f.asked = append(f.asked, l)
	hook := f.onAsk
	f.mu.Unlock()
	if hook != nil {
		hook(l)
	}
	ch := make(chan error, 1)
	if l.Token < f.ok {
		ch <- fmt.Errorf("storing how far shard %s was delivered (token %d): %w", l.Shard, l.Token, consumer.ErrLeaseLost)
	} else {
		ch <- nil
	}
	return ch
}

func (f *fencedUntil) Forget(string) {}

func (f *fencedUntil) Found(consumer.Lease) consumer.Position { return consumer.Position{} }

func (f *fencedUntil) WriteBack(context.Context) error { return nil }

// markedReader starts a reader of a shard of 5 records under marker, with
// a byte budget, and counts every batch that reaches the pipeline.
func markedReader(t *testing.T, ctx context.Context, marker consumer.Marker) (*Reader, *Stream, func() int) {
	t.Helper()
	shard := nextShard()
	api := consumertest.NewKinesis()
	api.Add(shard, &consumertest.KinesisShard{Records: 5})
	store := consumertest.NewStore(time.Minute)
	take, err := store.Acquire(ctx, shard, "me")
	require.NoError(t, err)
	cfg := consumertest.Config()
	out := make(chan *consumer.Batch)
	st := testStream(ctx, &cfg, api, store, out)
	st.Budget = budget.New(64<<20, st.Metrics)
	st.Marker = marker
	r := New(st, consumer.Shard{ID: shard}, take.Lease, source.Start{IterType: types.ShardIteratorTypeTrimHorizon})
	var mu sync.Mutex
	handed := 0
	go func() {
		for {
			select {
			case b := <-out:
				mu.Lock()
				handed += len(b.Records)
				mu.Unlock()
				if b.Admit() {
					b.Ack(nil)
				}
			case <-ctx.Done():
				return
			}
		}
	}()
	go r.Run()
	return r, st, func() int { mu.Lock(); defer mu.Unlock(); return handed }
}

// Guards the write-ahead mark on the stop and lost-lease paths (issue 59):
// a reader that ends (stopped, or its lease lost) while its mark's write
// has not succeeded hands none of the answer over, and the answer's charge
// comes back to the budget, with nothing taken back as leaked.
func TestMarkNotWrittenWhenTheReaderEndsHandsNothingOverAndGivesTheBudgetBack(t *testing.T) {
	ends := map[string]struct {
		marker func() consumer.Marker
		end    func(r *Reader)
	}{
		"stopped, the write never answered": {
			marker: func() consumer.Marker { return &heldMarker{release: make(chan struct{})} },
			end:    func(r *Reader) { r.Stop() },
		},
		"cancelled, the write never answered": {
			marker: func() consumer.Marker { return &heldMarker{release: make(chan struct{})} },
			end:    func(r *Reader) { r.Cancel() },
		},
		"lease lost, the write fenced": {
			marker: func() consumer.Marker { return &fencedUntil{ok: 1 << 62} },
			end:    func(r *Reader) { r.MarkLost() },
		},
	}
	for name, c := range ends {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			ctx, cancel := context.WithCancel(t.Context())
			defer cancel()
			r, st, handed := markedReader(t, ctx, c.marker())
			time.Sleep(300 * time.Millisecond)
			held, _, _ := st.Budget.State()
			require.Positive(t, held, "the answer is charged while its mark is written")
			c.end(r)
			select {
			case <-r.Done():
			case <-time.After(10 * time.Second):
				t.Fatal("the reader did not end")
			}
			assert.Zero(t, handed(), "records were handed over without a successful mark write")
			held, _, _ = st.Budget.State()
			assert.Zero(t, held, "the budget still holds the dropped answer's charge")
			assert.Zero(t, st.Budget.Leaked())
		})
	}
}

// Guards the early ask under a lease replaced before the reader waits for
// it (issue 59): the lease is renewed under a new token (a re-seed won the
// shard back) while the ask made under the old one is under way, and that
// ask is fenced. The reader asks again under the lease it now holds and
// delivers, without waiting for a further renewal.
func TestMarkAskedUnderAReplacedLeaseIsAskedAgainUnderTheNewOne(t *testing.T) {
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	var r *Reader
	var once sync.Once
	ready := make(chan struct{})
	marker := &fencedUntil{}
	marker.onAsk = func(l consumer.Lease) {
		<-ready
		once.Do(func() {
			l.Token++
			r.LeaseRenewed(l)
		})
	}
	var handed func() int
	r, _, handed = markedReader(t, ctx, marker)
	marker.mu.Lock()
	marker.ok = r.Lease().Token + 1
	marker.mu.Unlock()
	close(ready)
	defer func() {
		cancel()
		<-r.Done()
	}()
	require.Eventually(t, func() bool { return handed() == 5 }, 5*time.Second, 10*time.Millisecond,
		"the answer was not handed over after its ask was fenced under the replaced lease")
	marker.mu.Lock()
	defer marker.mu.Unlock()
	require.GreaterOrEqual(t, len(marker.asked), 2)
	assert.Equal(t, marker.asked[0].Token+1, marker.asked[len(marker.asked)-1].Token, "asked again under the new lease")
}

// foundMarker answers every ask at once and reports found as the mark its
// writes found stored.
type foundMarker struct{ found consumer.Position }

func (m *foundMarker) Ask(consumer.Lease, consumer.Position) <-chan error {
	ch := make(chan error, 1)
	ch <- nil
	return ch
}

func (m *foundMarker) Forget(string) {}

func (m *foundMarker) Found(consumer.Lease) consumer.Position { return m.found }

func (m *foundMarker) WriteBack(context.Context) error { return nil }

// TestMarkFoundStoredRaisesTheReadersMark guards "failed re-seed marks": a
// reader whose coordinator's re-seed won its shard back from a newcomer but
// lost the reply read on with its take's mark. The mark its write found
// stored (the newcomer's) marks the records up to it when they go over.
func TestMarkFoundStoredRaisesTheReadersMark(t *testing.T) {
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	shard := nextShard()
	api := consumertest.NewKinesis()
	api.Add(shard, &consumertest.KinesisShard{Records: 5})
	store := consumertest.NewStore(time.Minute)
	take, err := store.Acquire(ctx, shard, "me")
	require.NoError(t, err)
	cfg := consumertest.Config()
	out := make(chan *consumer.Batch)
	st := testStream(ctx, &cfg, api, store, out)
	// The newcomer delivered the first three records.
	st.Marker = &foundMarker{found: consumer.Position{Sequence: consumertest.SeqOf(shard, 3)}}
	r := New(st, consumer.Shard{ID: shard}, take.Lease, source.Start{IterType: types.ShardIteratorTypeTrimHorizon})
	go r.Run()
	defer func() {
		cancel()
		<-r.Done()
	}()
	select {
	case b := <-out:
		require.True(t, b.Admit())
		require.Len(t, b.Records, 5)
		var marked []bool
		for i := range b.Records {
			marked = append(marked, b.Redelivered(i))
		}
		assert.Equal(t, []bool{true, true, true, false, false}, marked, "the records up to the mark the write found go marked")
		b.Ack(nil)
	case <-time.After(5 * time.Second):
		t.Fatal("no batch was handed over")
	}
}
