package output

import (
	"bytes"
	"context"
	"log/slog"
	"math/rand/v2"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/redpanda-data/benthos/v4/public/service"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// numberedOutput builds and connects an ordered output with batching of
// three messages (or batching, if given) against api, and returns it with a batcher built from the
// policy it gave Benthos, to form batches as Benthos does.
func numberedOutput(t *testing.T, api *fakeKinesis, batching string) (*kinesisOutput, *service.Batcher) {
	t.Helper()
	if batching == "" {
		batching = "batching: {count: 3}"
	}
	conf, err := spec().ParseYAML("stream: s\npartition_key: ${! meta(\"key\") }\n"+batching, nil)
	require.NoError(t, err)
	res := service.MockResources()
	out, policy, inFlight, err := newOutput(conf, res)
	require.NoError(t, err)
	assert.Equal(t, 64, inFlight, "batches in flight")
	out.newClient = func(context.Context) (kinesisAPI, string, error) { return api, "eu-west-1", nil }
	require.NoError(t, out.Connect(t.Context()))
	t.Cleanup(func() { _ = out.Close(context.Background()) })
	batcher, err := policy.NewBatcher(res)
	require.NoError(t, err)
	return out, batcher
}

// form adds one message per key, tagged, and flushes them as a batch.
func form(t *testing.T, b *service.Batcher, tag string, keys ...string) service.MessageBatch {
	t.Helper()
	for _, k := range keys {
		m := service.NewMessage([]byte(tag + "/" + k))
		m.MetaSetMut("key", k)
		b.Add(m)
	}
	batch, err := b.Flush(t.Context())
	require.NoError(t, err)
	require.Len(t, batch, len(keys))
	return batch
}

// landed is the data of every record the fake was sent, in order.
func (f *fakeKinesis) landed() []string {
	f.mu.Lock()
	defer f.mu.Unlock()
	var out []string
	for _, in := range f.puts {
		for _, e := range in.Records {
			out = append(out, string(e.Data))
		}
	}
	return out
}

func TestNumberedBatchesAreWrittenInTheOrderTheyWereFormed(t *testing.T) {
	api := &fakeKinesis{}
	out, batcher := numberedOutput(t, api, "")
	first := form(t, batcher, "1", "a", "b", "c")
	second := form(t, batcher, "2", "a", "b", "c")

	// The second batch reaches the output first, as one of Benthos'
	// writer goroutines may: it waits for the first to take its place.
	done := make(chan error, 1)
	go func() { done <- out.WriteBatch(t.Context(), second) }()
	require.Never(t, func() bool { return len(api.landed()) > 0 }, 200*time.Millisecond, 10*time.Millisecond,
		"the second batch was written before the first reached the output")

	require.NoError(t, out.WriteBatch(t.Context(), first))
	require.NoError(t, <-done)
	assert.Equal(t, []string{"1/a", "1/b", "1/c", "2/a", "2/b", "2/c"}, api.landed(), "each key's records in the order the batches were formed")
}

func TestNumberedBatchDoesNotWaitForeverForALostOne(t *testing.T) {
	api := &fakeKinesis{}
	out, batcher := numberedOutput(t, api, "")
	out.order.gapWait = 50 * time.Millisecond
	_ = form(t, batcher, "1", "a") // formed, but never reaches the output
	second := form(t, batcher, "2", "a")

	require.NoError(t, out.WriteBatch(t.Context(), second))
	assert.Equal(t, []string{"2/a"}, api.landed())
}

func TestFailedNumberedBatchDoesNotHoldLaterOnes(t *testing.T) {
	api := &fakeKinesis{}
	out, batcher := numberedOutput(t, api, "")
	out.order.gapWait = time.Hour
	zeroth := form(t, batcher, "0", "a")
	first := form(t, batcher, "1", "a")
	second := form(t, batcher, "2", "a")

	// Batch 1 fails while it waits behind batch 0 (its context ends):
	// Benthos fails it, and its messages come back, if at all, in a new
	// batch with a new number. Batch 2 then waits for 0 alone.
	ctx, cancel := context.WithCancel(t.Context())
	cancel()
	require.ErrorIs(t, out.WriteBatch(ctx, first), context.Canceled)
	done := make(chan error, 1)
	go func() { done <- out.WriteBatch(t.Context(), second) }()
	require.Never(t, func() bool { return len(api.landed()) > 0 }, 200*time.Millisecond, 10*time.Millisecond,
		"batch 2 went ahead of batch 0 once batch 1 failed")

	require.NoError(t, out.WriteBatch(t.Context(), zeroth))
	require.NoError(t, <-done)
	assert.Equal(t, []string{"0/a", "2/a"}, api.landed())
}

// A user's batching processors run before the output's numbering: one that
// splits a batch gets each part numbered, Benthos joins the parts again, and
// the batch takes the whole range; one that drops a batch takes no number.
func TestNumberedBatchesThroughUserProcessors(t *testing.T) {
	api := &fakeKinesis{}
	out, batcher := numberedOutput(t, api, `batching:
  count: 3
  processors:
    - split: {size: 1}
    - mapping: 'root = if content().has_prefix("drop") { deleted() }'`)
	split := form(t, batcher, "1", "a", "b", "c")
	first, last, ok := out.order.numbers(split)
	require.True(t, ok)
	assert.Equal(t, [2]uint64{0, 2}, [2]uint64{first, last}, "a batch split in three carries three numbers")

	for _, k := range []string{"a", "b", "c"} {
		m := service.NewMessage([]byte("drop/" + k))
		m.MetaSetMut("key", k)
		batcher.Add(m)
	}
	dropped, err := batcher.Flush(t.Context())
	require.NoError(t, err)
	require.Empty(t, dropped)

	next := form(t, batcher, "2", "a", "b", "c")
	first, _, ok = out.order.numbers(next)
	require.True(t, ok)
	assert.Equal(t, uint64(3), first, "a dropped batch takes no number")

	done := make(chan error, 1)
	go func() { done <- out.WriteBatch(t.Context(), next) }()
	require.NoError(t, out.WriteBatch(t.Context(), split))
	require.NoError(t, <-done)
	assert.Equal(t, []string{"1/a", "1/b", "1/c", "2/a", "2/b", "2/c"}, api.landed())
}

// The numbered policy is rebuilt from the batching field in the global
// environment. A batching processor that only the caller's environment
// knows cannot be rebuilt there: the output then writes one batch at a
// time, with the user's policy as it is, instead of failing to start.
func TestBatchingProcessorOfACustomEnvironmentWritesOneBatchAtATime(t *testing.T) {
	env := service.NewEnvironment()
	require.NoError(t, env.RegisterBatchProcessor("only_here", service.NewConfigSpec(),
		func(*service.ParsedConfig, *service.Resources) (service.BatchProcessor, error) { return nil, nil }))
	conf, err := spec().ParseYAML("stream: s\npartition_key: k\nbatching: {count: 3, processors: [{only_here: {}}]}", env)
	require.NoError(t, err)
	out, policy, inFlight, err := newOutput(conf, service.MockResources())
	require.NoError(t, err)
	assert.Equal(t, 1, inFlight, "one batch at a time")
	assert.Nil(t, out.order, "not numbered")
	assert.Equal(t, 3, policy.Count, "the user's policy")
}

func TestBatchOrderProcessorIsNotForConfigs(t *testing.T) {
	b := service.NewStreamBuilder()
	require.NoError(t, b.AddProcessorYAML(batchOrderProcessor+": {id: x}"))
	require.NoError(t, b.AddInputYAML("generate: {count: 1, interval: \"\", mapping: 'root = \"x\"'}"))
	require.NoError(t, b.AddOutputYAML("drop: {}"))
	strm, err := b.Build()
	require.NoError(t, err)
	ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
	defer cancel()
	err = strm.Run(ctx)
	require.Error(t, err)
	assert.Contains(t, err.Error(), "added by the kinesis output")
}

// TestNumbersReachTheOutputThroughBenthos runs a stream whose ordered
// output writes eight batches at once, with writes of random length so they
// overlap and finish out of turn: every batch the output's batching formed
// must reach WriteBatch with its number (none passed over), and each key's
// messages land in the order the input emitted them.
func TestNumbersReachTheOutputThroughBenthos(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	var rngMu sync.Mutex
	api := &fakeKinesis{delay: func() time.Duration {
		rngMu.Lock()
		defer rngMu.Unlock()
		return time.Duration(rng.IntN(3000)) * time.Microsecond
	}}
	var built *kinesisOutput
	env := envWithFake(t, api, func(o *kinesisOutput) { built = o })
	b := env.NewStreamBuilder()
	require.NoError(t, b.SetYAML(`
input:
  generate:
    count: 3000
    interval: ""
    batch_size: 1
    mapping: root = counter().string()
output:
  kinesis:
    stream: events
    partition_key: '${! "key-" + (content().number() % 7).string() }'
    max_in_flight: 8
    batching: {count: 5, period: 1ms}
`))
	require.NoError(t, b.SetLoggerYAML("level: none"))
	stream, err := b.Build()
	require.NoError(t, err)
	ctx, cancel := contextWithTimeout(t, 60*time.Second)
	defer cancel()
	require.NoError(t, stream.Run(ctx))

	last := map[int]int{}
	seen := map[int]bool{}
	for _, d := range api.landed() {
		n, err := strconv.Atoi(d)
		require.NoError(t, err)
		require.False(t, seen[n], "message %d written twice", n)
		seen[n] = true
		require.Greater(t, n, last[n%7], "key-%d: message %d landed after %d", n%7, n, last[n%7])
		last[n%7] = n
	}
	assert.Len(t, seen, 3000)
	require.NotNil(t, built.order, "the ordered output with batching numbers its batches")
	built.order.mu.Lock()
	defer built.order.mu.Unlock()
	assert.Positive(t, built.order.issued.Load())
	assert.Equal(t, built.order.issued.Load(), built.order.entered, "every numbered batch reached the output in its turn")
	assert.Empty(t, built.order.done, "no batch was through out of turn")
}

// TestOnlyTheLowestWaiterPassesOverAGap: batch 0 never reaches the output,
// batch 2 does, then batch 1 a little later. Batch 2's gap timer fires
// first, but batch 1 is waiting, not lost: only batch 1, the lowest waiter,
// may pass over the gap (number 0), and batch 2 then waits for batch 1 to
// take its place, so key a's records land 1 before 2. Before the fix batch
// 2 passed over 0 and 1 alike, both went at once, and the warning named
// batch 1 as never having arrived.
func TestOnlyTheLowestWaiterPassesOverAGap(t *testing.T) {
	api := &fakeKinesis{}
	out, batcher := numberedOutput(t, api, "")
	const wait = 200 * time.Millisecond
	out.order.gapWait = wait
	var logs bytes.Buffer
	out.order.log = service.NewLoggerFromSlog(slog.New(slog.NewTextHandler(&logs, nil)))
	_ = form(t, batcher, "0", "a") // formed, but never reaches the output
	first := form(t, batcher, "1", "a")
	second := form(t, batcher, "2", "a")

	done2 := make(chan error, 1)
	go func() { done2 <- out.WriteBatch(t.Context(), second) }()
	time.Sleep(wait / 2)
	done1 := make(chan error, 1)
	go func() { done1 <- out.WriteBatch(t.Context(), first) }()

	require.NoError(t, <-done1)
	require.NoError(t, <-done2)
	assert.Equal(t, []string{"1/a", "2/a"}, api.landed(), "key a's records in the order their batches were formed")
	assert.Contains(t, logs.String(), "Batches numbered 0 to 0 ", "only the missing batch is passed over")
	assert.NotContains(t, logs.String(), "0 to 1 ", "batch 1 was waiting, not missing")
}
