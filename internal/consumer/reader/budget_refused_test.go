package reader

import (
	"context"
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

// budgetReader runs a reader of a new shard of records records with cfg,
// charging b; its batches come on out, not yet admitted.
func budgetReader(t *testing.T, ctx context.Context, b *budget.Budget, cfg *consumer.Config, records int) (*Reader, chan *consumer.Batch) {
	t.Helper()
	shard := nextShard()
	api := consumertest.NewKinesis()
	api.Add(shard, &consumertest.KinesisShard{Records: records})
	store := consumertest.NewStore(time.Minute)
	take, err := store.Acquire(ctx, shard, "me")
	require.NoError(t, err)
	out := make(chan *consumer.Batch)
	st := testStream(ctx, cfg, api, store, out)
	st.Budget = b
	r := New(st, consumer.Shard{ID: shard}, take.Lease, source.Start{IterType: types.ShardIteratorTypeTrimHorizon})
	go r.Run()
	t.Cleanup(func() { r.Cancel(); <-r.Done() })
	return r, out
}

// receive is the next batch on out, not admitted, taken once the reader
// waits in its send (as it does while the pipeline is busy): the receiver
// then runs on while the reader's goroutine is only made ready.
func receive(t *testing.T, out chan *consumer.Batch) *consumer.Batch {
	t.Helper()
	time.Sleep(50 * time.Millisecond)
	select {
	case b := <-out:
		return b
	case <-time.After(10 * time.Second):
		t.Fatal("no batch handed over")
		return nil
	}
}

// Guards issue 59 item 1: a batch that Admit refuses on its first delivery
// (the lease lost, or past its local deadline after a pause) is given back
// to the budget once its reader ends, on the default path and in lanes. The
// refusal runs at once after the batch is received, before the reader's
// goroutine goes on past its send: the order the scheduler gives when the
// reader waited in its send.
func TestRefusedFirstDeliveryLeaksNoBudgetRoom(t *testing.T) {
	t.Parallel()
	ends := map[string]func(r *Reader, b *consumer.Batch){
		// The lease is lost (a reset, a re-created stream, a re-seed that
		// found the shard taken): Admit refuses, the reader ends.
		"lease lost": func(r *Reader, b *consumer.Batch) {
			r.MarkLost()
			assert.False(t, b.Admit(), "a batch of a lost lease was admitted")
		},
		// The lease's deadline passed while the batch waited (a pause):
		// Admit refuses, and the reader is then stopped (a hand-off).
		"lease deadline passed, then handed off": func(r *Reader, b *consumer.Batch) {
			l := r.Lease()
			l.Deadline = time.Now().Add(-time.Second)
			r.LeaseRenewed(l)
			assert.False(t, b.Admit(), "a batch past its lease's deadline was admitted")
			r.Stop()
		},
		// The same, and the reader is ended at once (shutdown out of time).
		"lease deadline passed, then cancelled": func(r *Reader, b *consumer.Batch) {
			l := r.Lease()
			l.Deadline = time.Now().Add(-time.Second)
			r.LeaseRenewed(l)
			assert.False(t, b.Admit(), "a batch past its lease's deadline was admitted")
			r.Cancel()
		},
	}
	for name, end := range ends {
		for _, lanes := range []int{1, 2} {
			t.Run(name+", shard_parallelism "+itoa(lanes), func(t *testing.T) {
				t.Parallel()
				b := budget.New(64<<20, consumer.NewMetrics(nil))
				cfg := consumertest.Config()
				cfg.ShardParallelism = lanes
				const readers = 5
				for range readers {
					r, out := budgetReader(t, t.Context(), b, &cfg, 20)
					end(r, receive(t, out))
					select {
					case <-r.Done():
					case <-time.After(10 * time.Second):
						t.Fatal("the reader did not end")
					}
				}
				assert.NoError(t, b.Drained(), "%d readers ended with a refused batch", readers)
			})
		}
	}
}
