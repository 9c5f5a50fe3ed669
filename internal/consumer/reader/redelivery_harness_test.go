package reader

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/service/kinesis/types"
	"github.com/stretchr/testify/require"

	"github.com/connect-kinesis/connect-kinesis/internal/consumer"
	"github.com/connect-kinesis/connect-kinesis/internal/consumer/consumertest"
	"github.com/connect-kinesis/connect-kinesis/internal/consumer/source"
	"github.com/connect-kinesis/connect-kinesis/internal/kinesisx"
)

// poisonHarness is one running reader of one shard, its batches on out for
// the test to ack, over a fake Kinesis and store.
type poisonHarness struct {
	r     *Reader
	out   chan *consumer.Batch
	store *consumertest.Store
	shard string
	// processed is the input's record of its pipeline's last success,
	// shared by the harnesses of one input.
	processed *Processed
}

// shardSeq numbers the shards of these tests: their metrics are kept by
// shard in one exporter for the whole run (also with -count above 1).
var shardSeq atomic.Int64

func nextShard() string { return fmt.Sprintf("shardId-%012d", 100+shardSeq.Add(1)) }

// poisonConfig is the test config with a fast backoff and pol.
func poisonConfig(limit int, pol consumer.Redelivery) consumer.Config {
	cfg := consumertest.Config()
	cfg.Limit = limit
	cfg.Backoff = kinesisx.Backoff{InitialInterval: time.Millisecond, MaxInterval: 4 * time.Millisecond}
	cfg.Redelivery = pol
	return cfg
}

// startPoisonReader runs a reader of shard, whose fake holds ks, with cfg;
// metrics go to consumertest.Gauges (give each test its own shard).
func startPoisonReader(t *testing.T, shard string, ks *consumertest.KinesisShard, cfg consumer.Config) *poisonHarness {
	t.Helper()
	return startInputReader(t, shard, ks, cfg, new(Processed))
}

// startInputReader is startPoisonReader for one shard of an input whose
// readers share processed.
func startInputReader(t *testing.T, shard string, ks *consumertest.KinesisShard, cfg consumer.Config, processed *Processed) *poisonHarness {
	t.Helper()
	ctx, cancel := context.WithCancel(t.Context())
	api := consumertest.NewKinesis()
	api.Add(shard, ks)
	store := consumertest.NewStore(time.Minute)
	take, err := store.Acquire(ctx, shard, "me")
	require.NoError(t, err)
	require.NoError(t, cfg.Validate())
	out := make(chan *consumer.Batch)
	st := testStream(ctx, &cfg, api, store, out)
	st.Metrics = consumer.NewMetrics(consumertest.Metrics(t))
	st.Processed = processed
	r := New(st, consumer.Shard{ID: shard}, take.Lease, source.Start{IterType: types.ShardIteratorTypeTrimHorizon})
	go r.Run()
	t.Cleanup(func() {
		cancel()
		<-r.Done()
	})
	return &poisonHarness{r: r, out: out, store: store, shard: shard, processed: processed}
}

// next is the next batch the reader hands over (admitted, as
// coordinator.Consumer.Next does).
func (h *poisonHarness) next(t *testing.T, within time.Duration) *consumer.Batch {
	t.Helper()
	timeout := time.After(within)
	for {
		select {
		case b := <-h.out:
			if b.Admit() {
				return b
			}
		case <-timeout:
			t.Fatal("no batch handed over")
			return nil
		}
	}
}

// checkpoint is the shard's committed checkpoint ("" without one).
func (h *poisonHarness) checkpoint(t *testing.T) string {
	p, ok, err := h.store.Checkpoint(t.Context(), h.shard)
	require.NoError(t, err)
	if !ok {
		return ""
	}
	return p.String()
}

// metric is a counter or gauge of the harness's shard, with extra labels.
func (h *poisonHarness) metric(name string, extra ...string) int64 {
	key := name + "{s," + h.shard
	for _, l := range extra {
		key += "," + l
	}
	v, _ := consumertest.Gauges.Get(key + "}")
	return v
}

// fakeDeadLetter keeps what it was given; it fails the first fail writes,
// and waits for open when set.
type fakeDeadLetter struct {
	mu    sync.Mutex
	got   []consumer.DeadRecord
	fail  int
	calls int
	open  chan struct{}
}

var errDeadLetterDown = errors.New("dead letter output down")

func (f *fakeDeadLetter) Write(ctx context.Context, recs []consumer.DeadRecord) error {
	f.mu.Lock()
	f.calls++
	open := f.open
	if f.fail > 0 {
		f.fail--
		f.mu.Unlock()
		return errDeadLetterDown
	}
	f.mu.Unlock()
	if open != nil {
		select {
		case <-open:
		case <-ctx.Done():
			return ctx.Err()
		}
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	f.got = append(f.got, recs...)
	return nil
}

func (f *fakeDeadLetter) records() []consumer.DeadRecord {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]consumer.DeadRecord(nil), f.got...)
}

func (f *fakeDeadLetter) writes() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.calls
}
