package output

import (
	"context"
	"fmt"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redpanda-data/benthos/v4/public/service"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// countingOutput is the kinesis output with a count of the batches it
// holds at once: every batch in WriteBatch is in memory until it returns.
type countingOutput struct {
	*kinesisOutput
	now, peak atomic.Int64
}

func (c *countingOutput) WriteBatch(ctx context.Context, b service.MessageBatch) error {
	n := c.now.Add(1)
	for p := c.peak.Load(); n > p && !c.peak.CompareAndSwap(p, n); p = c.peak.Load() {
	}
	defer c.now.Add(-1)
	return c.kinesisOutput.WriteBatch(ctx, b)
}

// runCounting runs generate (n messages, the partition key from mapping)
// into the ordered kinesis output with its defaults (max_in_flight 64,
// batches of 500) against api, and returns the most batches it held at
// once.
func runCounting(t *testing.T, api *fakeKinesis, n int, key string) int64 {
	t.Helper()
	var out *countingOutput
	env := service.NewEnvironment()
	require.NoError(t, env.RegisterBatchOutput("kinesis", spec(),
		func(conf *service.ParsedConfig, mgr *service.Resources) (service.BatchOutput, service.BatchPolicy, int, error) {
			o, policy, inFlight, err := newOutput(conf, mgr)
			if err != nil {
				return nil, service.BatchPolicy{}, 0, err
			}
			o.newClient = func(context.Context) (kinesisAPI, string, error) { return api, "eu-west-1", nil }
			out = &countingOutput{kinesisOutput: o}
			return out, policy, inFlight, nil
		}))
	b := env.NewStreamBuilder()
	require.NoError(t, b.SetYAML(fmt.Sprintf(`
input:
  generate:
    count: %d
    interval: ""
    mapping: |
      root = counter().string()
      meta key = %s
output:
  kinesis:
    stream: s
    partition_key: ${! @key }
logger: { level: warn }
`, n, key)))
	s, err := b.Build()
	require.NoError(t, err)
	ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
	defer cancel()
	require.NoError(t, s.Run(ctx))
	return out.peak.Load()
}

// TestOrderedOutputHoldsNoBatchThatCouldOnlyWait checks that an ordered
// output whose batches all hold the same keys does not take max_in_flight
// of them at once (each held in memory while it waits for the one before),
// and that batches of distinct keys still go many at once.
func TestOrderedOutputHoldsNoBatchThatCouldOnlyWait(t *testing.T) {
	t.Parallel()
	t.Run("keys in every batch", func(t *testing.T) {
		t.Parallel()
		api := &fakeKinesis{delay: func() time.Duration { return time.Millisecond }}
		// 50 keys: each batch of 500 takes 10 rounds, and the next one
		// can only wait for it.
		peak := runCounting(t, api, 20000, `"user-%d".format(counter() % 50)`)
		// The write sending, one waiting, and one Benthos hands over as
		// the first ends.
		assert.LessOrEqual(t, peak, int64(3), "batches held at once")
	})
	t.Run("no key in two batches", func(t *testing.T) {
		t.Parallel()
		api := &fakeKinesis{delay: func() time.Duration { return 500 * time.Millisecond }}
		peak := runCounting(t, api, 20000, `counter().string()`)
		assert.GreaterOrEqual(t, peak, int64(6), "batches held at once")
	})
}

// TestPacerLetsABatchThroughOnlyWhenTheOneBeforeHasStarted checks the
// pacer's rules one by one: the next batch waits for the one before to
// send or wait, then for a waiting write to go on; a batch that never
// reaches a write holds the next back only for the pacer's wait.
func TestPacerLetsABatchThroughOnlyWhenTheOneBeforeHasStarted(t *testing.T) {
	p := newBatchPacer()
	defer p.close()
	p.wait = 200 * time.Millisecond
	through := func() (*pacedWrite, <-chan struct{}) {
		done := make(chan struct{})
		var w *pacedWrite
		go func() {
			defer close(done)
			w = p.letThrough(t.Context())
		}()
		<-done
		return w, done
	}
	first, _ := through()
	require.NotNil(t, first)

	// The first has not started: the second waits, until it sends.
	second := make(chan *pacedWrite, 1)
	go func() {
		second <- p.letThrough(t.Context())
	}()
	select {
	case <-second:
		t.Fatal("a batch went through before the one before it started")
	case <-time.After(50 * time.Millisecond):
	}
	first.watch(false)
	w2 := <-second

	// The second waits with nothing to send: the third is held back
	// (past the pacer's wait, which only covers lost batches) until it
	// sends again.
	w2.watch(true)
	third := make(chan *pacedWrite, 1)
	go func() {
		third <- p.letThrough(t.Context())
	}()
	select {
	case <-third:
		t.Fatal("a batch went through while a write waited")
	case <-time.After(3 * p.wait):
	}
	w2.watch(false)
	w3 := <-third

	// The third never reaches a write: the fourth goes after the wait.
	start := time.Now()
	_, _ = through()
	assert.GreaterOrEqual(t, time.Since(start), p.wait)
	w3.done()
	first.done()
	w2.done()
}

// Issue 38 item 3: when the pacer gives up on a batch that has not reached
// its write (the pacer's wait), it forgets that batch alone. Before, it set
// the count of starting batches to 0, and the late batch's write then took
// the count of the batch let through after it: a third batch went through
// while the second had neither sent nor started to wait.
func TestPacerGivingUpOnALateBatchForgetsOnlyThatOne(t *testing.T) {
	p := newBatchPacer()
	defer p.close()
	p.wait = 100 * time.Millisecond
	letThrough := func() *pacedWrite { return p.letThrough(t.Context()) }
	late := letThrough()
	second := letThrough() // after the wait: late is given up on
	late.watch(false)      // late reaches its write after all

	third := make(chan *pacedWrite, 1)
	go func() { third <- letThrough() }()
	select {
	case <-third:
		t.Fatal("a batch went through while the one before it had not started")
	case <-time.After(p.wait / 2):
	}
	second.watch(false)
	select {
	case w := <-third:
		w.done()
	case <-time.After(5 * time.Second):
		t.Fatal("the third batch was not let through once the second sent")
	}
	late.done()
	second.done()
}
