package output

import (
	"context"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/redpanda-data/benthos/v4/public/service"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// Issue 39 item 6: a message that can never be written (empty partition
// key, over max_record_size) fails the same way on every replay, and an
// at-least-once input replays it forever. The error Benthos logs at ERROR
// for the write names the fix: the field, a fallback output, and the
// example that sets such messages aside. Before it said only "writing to
// stream events: 2 of 3 messages failed, e.g. message 1: partition key is
// empty: it must be 1 to 256 characters".
func TestNeverWritableMessagesNameTheFix(t *testing.T) {
	t.Parallel()
	api := &fakeKinesis{refuseKey: "refused"}
	o := newTestOutput(t, `
stream: events
max_record_size: 100
partition_key: '${! if content() == "nokey" { "" } else if content() == "refused" { "refused" } else { "key-" + content() } }'
max_retries: 1
backoff: {initial_interval: 1ms, max_interval: 1ms}
`, api)
	require.NoError(t, o.Connect(t.Context()))
	write := func(bodies ...string) error {
		var batch service.MessageBatch
		for _, b := range bodies {
			batch = append(batch, service.NewMessage([]byte(b)))
		}
		return o.WriteBatch(t.Context(), batch)
	}

	err := write("a", "nokey", strings.Repeat("x", 100))
	require.Error(t, err)
	t.Logf("ERROR: Failed to send message to kinesis: %v", err)
	for _, want := range []string{"2 of 3 messages failed", "can never be written", "`partition_key`", "`max_record_size`", "`fallback` output", "config/examples/output_dlq.yaml"} {
		assert.Contains(t, err.Error(), want)
	}

	err = write("a", "nokey")
	require.Error(t, err)
	assert.Contains(t, err.Error(), "`partition_key`")
	assert.NotContains(t, err.Error(), "`max_record_size`", "only the fields that fit the failures")

	// A refusal may succeed on a replay: no hint.
	err = write("a", "refused")
	require.Error(t, err)
	assert.NotContains(t, err.Error(), "can never be written")
}

// warnRecorder keeps the messages of the WARN records a pipeline logs.
type warnRecorder struct {
	mu   sync.Mutex
	msgs []string
}

func (r *warnRecorder) Enabled(_ context.Context, l slog.Level) bool { return l >= slog.LevelWarn }
func (r *warnRecorder) Handle(_ context.Context, rec slog.Record) error {
	if rec.Level == slog.LevelWarn {
		r.mu.Lock()
		r.msgs = append(r.msgs, rec.Message)
		r.mu.Unlock()
	}
	return nil
}
func (r *warnRecorder) WithAttrs([]slog.Attr) slog.Handler { return r }
func (r *warnRecorder) WithGroup(string) slog.Handler      { return r }

// Issue 39 item 7: a partition key that resolves to null
// (`${! json("user_id") }` on messages without user_id) was written as the
// key "null", silently, every such message to one shard. The output warns
// once and counts them. Before: no warning, no metric.
func TestNullPartitionKeyWarnsOnceAndIsCounted(t *testing.T) {
	t.Parallel()
	api := &fakeKinesis{}
	env := envWithFake(t, api, nil)
	b := env.NewStreamBuilder()
	require.NoError(t, b.SetYAML(`
input:
  generate:
    count: 40
    interval: ""
    batch_size: 1
    mapping: |
      root = if counter() % 4 == 0 { {"user_id": "u1"} } else { {"name": "no user"} }
output:
  kinesis:
    stream: events
    partition_key: ${! json("user_id") }
    batching: {count: 10, period: 1ms}
`))
	rec := &warnRecorder{}
	b.SetLogger(slog.New(rec))
	id := fmt.Sprint(captureRuns.Add(1))
	require.NoError(t, b.SetMetricsYAML("test_capture: { id: \""+id+"\" }"))
	stream, err := b.Build()
	require.NoError(t, err)
	ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
	defer cancel()
	require.NoError(t, stream.Run(ctx))

	assert.Len(t, api.landed(), 40, "the messages are still written")
	var nullWarnings []string
	rec.mu.Lock()
	for _, m := range rec.msgs {
		if strings.Contains(m, `"null"`) {
			nullWarnings = append(nullWarnings, m)
		}
	}
	rec.mu.Unlock()
	require.Len(t, nullWarnings, 1, "warned once: %q", rec.msgs)
	t.Logf("WARN: %s", nullWarnings[0])
	assert.Contains(t, nullWarnings[0], "partition_key")
	assert.Contains(t, nullWarnings[0], MetricNullPartitionKeys)
	assert.EqualValues(t, 30, takeCaptured(id).Counter(MetricNullPartitionKeys, "events"), "null keys counted")
}
