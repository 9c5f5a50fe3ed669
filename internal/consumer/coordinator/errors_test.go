package coordinator

import (
	"context"
	"errors"
	"sync/atomic"
	"testing"
	"time"

	"github.com/connect-kinesis/connect-kinesis/internal/consumer"
	"github.com/connect-kinesis/connect-kinesis/internal/consumer/consumertest"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestConsumerBacksOffWhenThrottledAndLosesNothing(t *testing.T) {
	api := consumertest.NewKinesis()
	const shard = "shardId-000000000000"
	api.Add(shard, &consumertest.KinesisShard{Records: 30})
	api.Throttle[shard] = 3
	c := startConsumer(t, testConfig(), api, consumertest.NewStore(time.Second))
	log := &acked{}
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	go ackAll(ctx, c, log)
	require.Eventually(t, func() bool { return len(log.all()) == 30 }, 10*time.Second, 10*time.Millisecond)
	for i, d := range log.all() {
		assert.Equal(t, shard+"/"+itoa(i+1), d)
	}
	calls := api.CallTimes(shard)
	require.GreaterOrEqual(t, len(calls), 4)
	// Every GetRecords, the three throttled retries included, comes at
	// least poll_interval after the previous one, however the jittered
	// backoff falls: that is what keeps a shard within 5 reads/s.
	for i := 1; i < len(calls); i++ {
		assert.GreaterOrEqual(t, calls[i].Sub(calls[i-1]), testConfig().PollInterval, "call %d came too soon", i)
	}
}

// takeErrStore fails every take, as Redis would when down or read-only
// (the take reads the checkpoint with the lease), and counts them.
type takeErrStore struct {
	*consumertest.Store
	failedTakes atomic.Int32
}

func (s *takeErrStore) Acquire(context.Context, string, string) (consumer.Take, error) {
	s.failedTakes.Add(1)
	return consumer.Take{}, errors.New("READONLY You can't write against a read only replica")
}

func TestConsumerNeverTakesARedisErrorForNoCheckpoint(t *testing.T) {
	api := consumertest.NewKinesis()
	const shard = "shardId-000000000000"
	api.Add(shard, &consumertest.KinesisShard{Records: 30})
	st := &takeErrStore{Store: consumertest.NewStore(time.Second)}
	c := startConsumer(t, testConfig(), api, st)
	// Several balancing rounds try to take the shard and fail.
	require.Eventually(t, func() bool { return st.failedTakes.Load() >= 3 }, 10*time.Second, 10*time.Millisecond,
		"the take is tried again in later rounds")
	select {
	case b := <-c.Batches():
		t.Fatalf("read shard %s without knowing its checkpoint", b.Shard)
	default:
	}
	api.Mu.Lock()
	defer api.Mu.Unlock()
	assert.Empty(t, api.IterReqs, "no iterator, so no default start position, without a checkpoint answer")
}

func TestConsumerRedeliversNackedBatchesWithBackoffInOrder(t *testing.T) {
	api := consumertest.NewKinesis()
	const shard = "shardId-000000000000"
	api.Add(shard, &consumertest.KinesisShard{Records: 30})
	c := startConsumer(t, testConfig(), api, consumertest.NewStore(time.Second))
	var got []string
	var nackTimes []time.Time
	nacks := 0
	timeout := time.After(10 * time.Second)
	for len(got) < 30 {
		select {
		case b := <-c.Batches():
			if string(b.Records[0].Data) == shard+"/11" && nacks < 3 {
				nacks++
				nackTimes = append(nackTimes, time.Now())
				b.Ack(errors.New("output down"))
				continue
			}
			for _, r := range b.Records {
				got = append(got, string(r.Data))
			}
			b.Ack(nil)
		case <-timeout:
			t.Fatalf("only %d records acked", len(got))
		}
	}
	for i, d := range got {
		assert.Equal(t, shard+"/"+itoa(i+1), d, "the nacked batch comes again before anything after it")
	}
	require.Len(t, nackTimes, 3)
	// Redeliveries wait at least the initial backoff (10ms less 25% jitter)
	// rather than spin against a failing output.
	assert.GreaterOrEqual(t, nackTimes[1].Sub(nackTimes[0]), 7*time.Millisecond)
	assert.GreaterOrEqual(t, nackTimes[2].Sub(nackTimes[1]), 15*time.Millisecond, "and double")
}
