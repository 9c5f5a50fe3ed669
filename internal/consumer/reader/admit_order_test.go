package reader

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/connect-kinesis/connect-kinesis/internal/consumer"
	"github.com/connect-kinesis/connect-kinesis/internal/consumer/budget"
	"github.com/connect-kinesis/connect-kinesis/internal/consumer/consumertest"
)

// Guards the first-delivery order with shard_max_in_flight above 1: Admit
// refused a batch past its lease's local deadline (a pause), a renewal came,
// and the reader's next batch, already handed over behind it, was admitted:
// its records reached the pipeline before the earlier ones ever did (the
// consumer simulation, seed 9: "per-key order: i1.2 delivered
// s.0:shardId-000000000001/3 before s.0:shardId-000000000001/1").
func TestAdmitRefusesABatchBehindARefusedOne(t *testing.T) {
	t.Parallel()
	b := budget.New(64<<20, consumer.NewMetrics(nil))
	cfg := consumertest.Config()
	cfg.ShardMaxInFlight = 2
	cfg.Limit = 2
	r, out := budgetReader(t, t.Context(), b, &cfg, 4)

	first := receive(t, out)
	// The reader fetches the next two records and waits in its send of
	// them, as it does while the pipeline works on the first batch.
	time.Sleep(time.Second)
	l := r.Lease()
	l.Deadline = time.Now().Add(-time.Second)
	r.LeaseRenewed(l)
	require.False(t, first.Admit(), "a batch past its lease's deadline was admitted")
	l.Deadline = time.Now().Add(time.Hour)
	r.LeaseRenewed(l)

	second := receive(t, out)
	want := append(sequences(first), sequences(second)...)
	require.Len(t, want, 4)
	require.Less(t, want[1], want[2], "the batches came in the shard's order")
	assert.False(t, second.Admit(), "batch %v was admitted while the refused %v waits to be handed over again", sequences(second), sequences(first))

	// The reader hands the refused batch over again first, then the other.
	var got []string
	for len(got) < 4 {
		next := receive(t, out)
		require.True(t, next.Admit())
		got = append(got, sequences(next)...)
		next.Ack(nil)
	}
	assert.Equal(t, want, got, "the shard's records in order")
}

// sequences are the sequence numbers of b's records.
func sequences(b *consumer.Batch) []string {
	out := make([]string, len(b.Records))
	for i, rec := range b.Records {
		out[i] = rec.Sequence
	}
	return out
}
