package coordinator

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/connect-kinesis/connect-kinesis/internal/consumer"
	"github.com/connect-kinesis/connect-kinesis/internal/consumer/consumertest"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// refusingStore is a consumertest.Store that refuses every commit of one owner, as
// Redis does when a commit's WAIT finds no replica (min_replicas_to_ack
// with the replica gone) or the owner's user lost the right to run it
// (NOPERM after an ACL change), while its renewals still pass.
type refusingStore struct {
	*consumertest.Store
	owner string
}

var errRefused = errors.New("NOREPLICAS Not enough good replicas to write")

func (s *refusingStore) Commit(ctx context.Context, l consumer.Lease, p consumer.Position) error {
	if l.Owner == s.owner {
		return errRefused
	}
	return s.Store.Commit(ctx, l, p)
}

// A rebalance hand-off whose final commit can never land gives up after
// lease.handoff_timeout and lets the lease lapse: the member that asked
// for the shard then takes it once the lease expires, instead of never.
func TestHandOffWhoseFinalCommitNeverLandsLetsTheLeaseLapse(t *testing.T) {
	t.Parallel()
	api := consumertest.NewKinesis()
	shards := []string{"shardId-000000000000", "shardId-000000000001"}
	for _, id := range shards {
		api.Add(id, &consumertest.KinesisShard{Records: 5})
	}
	cfg := testConfig()
	cfg.Balance = consumer.BalanceCount
	st := &refusingStore{Store: consumertest.NewStore(cfg.LeasePeriod), owner: "a"}

	cfgA := cfg
	cfgA.InstanceID = "a"
	a := startConsumer(t, cfgA, api, st)
	// a reads both shards, and the pipeline acks everything it gets.
	seen := map[string]bool{}
	timeout := time.After(10 * time.Second)
	for len(seen) < len(shards) {
		select {
		case b := <-a.Batches():
			seen[b.Shard] = true
			b.Ack(nil)
		case <-timeout:
			t.Fatalf("a read only %v", seen)
		}
	}
	go ackAll(t.Context(), a, &acked{})

	cfgB := cfg
	cfgB.InstanceID = "b"
	joined := time.Now()
	b := startConsumer(t, cfgB, api, st)
	select {
	case got := <-b.Batches():
		t.Logf("b got shard %s %v after joining", got.Shard, time.Since(joined).Round(10*time.Millisecond))
		// a never committed: b reads the shard from its start.
		assert.Equal(t, consumertest.SeqOf(got.Shard, 1), got.Records[0].Sequence)
		got.Ack(nil)
	case <-time.After(10 * time.Second):
		ls, err := st.Leases(t.Context())
		require.NoError(t, err)
		t.Fatalf("the member that asked for a shard never got one in 10s; leases: %v", ls)
	}
}
