package output

import (
	"context"
	"fmt"
	"strconv"
	"testing"
	"time"

	"github.com/redpanda-data/benthos/v4/public/service"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// runGenerated runs generate (n messages numbered from 1, over keys
// partition keys) into the kinesis output configured by outputYAML (its
// fields under `kinesis:`, stream and partition key included) against api,
// and returns how long the stream ran. The run ends with an error after
// limit.
func runGenerated(t *testing.T, api *fakeKinesis, n, keys int, outputYAML string, limit time.Duration) (time.Duration, error) {
	t.Helper()
	env := service.NewEnvironment()
	require.NoError(t, env.RegisterBatchOutput("kinesis", spec(),
		func(conf *service.ParsedConfig, mgr *service.Resources) (service.BatchOutput, service.BatchPolicy, int, error) {
			o, policy, inFlight, err := newOutput(conf, mgr)
			if err != nil {
				return nil, service.BatchPolicy{}, 0, err
			}
			o.newClient = func(context.Context) (kinesisAPI, string, error) { return api, "eu-west-1", nil }
			return o, policy, inFlight, nil
		}))
	b := env.NewStreamBuilder()
	require.NoError(t, b.SetYAML(fmt.Sprintf(`
input:
  generate:
    count: %d
    interval: ""
    mapping: |
      root = counter().string()
      meta key = "k%%d".format(counter() %% %d)
output:
  kinesis:
    stream: s
    partition_key: ${! @key }
%s
logger: { level: warn }
`, n, keys, indent(outputYAML, "    "))))
	s, err := b.Build()
	require.NoError(t, err)
	ctx, cancel := context.WithTimeout(t.Context(), limit)
	defer cancel()
	start := time.Now()
	err = s.Run(ctx)
	return time.Since(start), err
}

// keyOrderViolations counts the records that landed before an earlier
// record of their key, and returns how many records landed. The data of
// each record is its message's number; a key's numbers must rise.
func keyOrderViolations(t *testing.T, api *fakeKinesis) (violations, landed int) {
	t.Helper()
	api.mu.Lock()
	defer api.mu.Unlock()
	last := map[string]int{}
	for _, in := range api.puts {
		for _, e := range in.Records {
			n, err := strconv.Atoi(string(e.Data))
			require.NoError(t, err)
			k := *e.PartitionKey
			if n <= last[k] {
				violations++
			}
			last[k] = n
			landed++
		}
	}
	return violations, landed
}

// Issue 38 item 2: a splitting processor in the output's batching made the
// numbering processor run once per part, so each part but the first waited
// out the pacer's 10 s for a part that could not reach the output before
// Benthos joined them all: 2,000 messages over 16 keys in batches of 500
// split in five took 161.7 s. Pacing is once per formed batch: the run ends
// in a small fraction of one 10 s wait per part, every key in order.
func TestOrderedOutputWithASplittingBatchingProcessorIsNotPaced(t *testing.T) {
	t.Parallel()
	for name, processors := range map[string]string{
		"split":          "- split: {size: 100}",
		"group_by_value": "- group_by_value: {value: '${! @key }'}",
	} {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			api := &fakeKinesis{delay: func() time.Duration { return time.Millisecond }}
			took, err := runGenerated(t, api, 2000, 16, "batching:\n  count: 500\n  period: 1s\n  processors:\n"+indent(processors, "    "), 60*time.Second)
			require.NoError(t, err, "the run ended within 60 s (before: a 10 s wait per extra part)")
			t.Logf("2,000 messages in %v", took)
			violations, landed := keyOrderViolations(t, api)
			assert.Equal(t, 2000, landed, "records landed")
			assert.Zero(t, violations, "per-key order violations")
			// 4 batches of 5 parts waited 16 × 10 s before; a generous bound
			// far below one 10 s wait per batch.
			assert.Less(t, took, 20*time.Second, "not paced per part")
		})
	}
}
