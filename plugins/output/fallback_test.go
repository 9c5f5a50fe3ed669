package output

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/redpanda-data/benthos/v4/public/service"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// failedSink is the fallback's second output: it keeps each message it is
// given with the fallback_error Benthos set on it.
type failedSink struct {
	mu     sync.Mutex
	errors map[string]string // body -> fallback_error
}

func (s *failedSink) Connect(context.Context) error { return nil }
func (s *failedSink) Close(context.Context) error   { return nil }

func (s *failedSink) WriteBatch(_ context.Context, b service.MessageBatch) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, m := range b {
		body, err := m.AsBytes()
		if err != nil {
			return err
		}
		reason, _ := m.MetaGet("fallback_error")
		s.errors[string(body)] = reason
	}
	return nil
}

// envWithFake returns an environment whose kinesis output is built as
// Benthos builds it, but talks to api; built, if set, is given each output.
func envWithFake(t *testing.T, api *fakeKinesis, built func(*kinesisOutput)) *service.Environment {
	t.Helper()
	env := service.NewEnvironment()
	require.NoError(t, env.RegisterBatchOutput("kinesis", spec(),
		func(conf *service.ParsedConfig, mgr *service.Resources) (service.BatchOutput, service.BatchPolicy, int, error) {
			o, policy, inFlight, err := newOutput(conf, mgr)
			if err != nil {
				return nil, service.BatchPolicy{}, 0, err
			}
			o.newClient = func(context.Context) (kinesisAPI, string, error) { return api, "eu-west-1", nil }
			if built != nil {
				built(o)
			}
			return o, policy, inFlight, nil
		}))
	return env
}

// runFallback runs generate -> fallback [kinesis (against api), sink] with
// the kinesis output configured by extra, twenty messages "1".."20" in
// input batches of inputBatch, and returns what reached the sink.
func runFallback(t *testing.T, api *fakeKinesis, inputBatch int, extra string) map[string]string {
	t.Helper()
	env := envWithFake(t, api, nil)
	sink := &failedSink{errors: map[string]string{}}
	require.NoError(t, env.RegisterBatchOutput("failed_sink", service.NewConfigSpec(),
		func(*service.ParsedConfig, *service.Resources) (service.BatchOutput, service.BatchPolicy, int, error) {
			return sink, service.BatchPolicy{}, 1, nil
		}))

	b := env.NewStreamBuilder()
	require.NoError(t, b.SetYAML(fmt.Sprintf(`
input:
  generate:
    count: 20
    interval: ""
    batch_size: %d
    mapping: root = counter().string()
output:
  fallback:
    - kinesis:
        stream: events
        max_record_size: 100
        partition_key: '${! if content() == "3" { "" } else if content() == "9" { "refused" } else { "key-" + content() } }'
        max_retries: 1
        backoff: {initial_interval: 1ms, max_interval: 1ms}
%s
    - failed_sink: {}
`, inputBatch, indent(extra, "        "))))
	require.NoError(t, b.SetLoggerYAML("level: none"))
	stream, err := b.Build()
	require.NoError(t, err)
	ctx, cancel := contextWithTimeout(t, 30*time.Second)
	defer cancel()
	require.NoError(t, stream.Run(ctx))
	return sink.errors
}

func indent(s, prefix string) string {
	if s == "" {
		return ""
	}
	return prefix + strings.ReplaceAll(s, "\n", "\n"+prefix)
}

// TestFallbackGetsExactlyTheFailedMessages: whatever the input's batches
// and whether the output batches, a message that fails reaches a fallback
// output alone, with its own reason, and every other message is written
// once. With an output batching policy Benthos answers each input batch
// with one error; the output's per-message errors must survive that.
func TestFallbackGetsExactlyTheFailedMessages(t *testing.T) {
	for _, tc := range []struct {
		name       string
		inputBatch int
		extra      string
	}{
		{"default batching, input batches of 20", 20, ""},
		{"default batching, single messages", 1, ""},
		{"no batching, input batches of 20", 20, "batching: {}"},
		{"custom batching, input batches of 4, unordered", 4, "batching: {count: 7, period: 10ms}\npreserve_order: false"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			api := &fakeKinesis{refuseKey: "refused"}
			failed := runFallback(t, api, tc.inputBatch, tc.extra)

			require.Len(t, failed, 2, "exactly the bad messages fail: %v", failed)
			assert.Contains(t, failed["3"], "partition key is empty")
			assert.Contains(t, failed["9"], "ProvisionedThroughputExceeded")

			sent := map[string]int{}
			for _, p := range api.puts {
				for _, e := range p.Records {
					sent[string(e.Data)]++
				}
			}
			for n := 1; n <= 20; n++ {
				body := fmt.Sprint(n)
				switch body {
				case "3":
					assert.Zero(t, sent[body], "a message with no key is never sent")
				case "9":
					assert.Equal(t, 2, sent[body], "a refused message is tried twice (max_retries 1), then fails")
				default:
					assert.Equal(t, 1, sent[body], "message %s is written exactly once", body)
				}
			}
		})
	}
}
