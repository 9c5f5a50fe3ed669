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
