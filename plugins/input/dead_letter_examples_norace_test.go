//go:build !race

package input

import (
	"bufio"
	"context"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"time"

	_ "github.com/redpanda-data/benthos/v4/public/components/io"
	"github.com/redpanda-data/benthos/v4/public/service"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/connect-kinesis/connect-kinesis/internal/producer/producertest"
	"github.com/connect-kinesis/connect-kinesis/internal/testenv"
	_ "github.com/connect-kinesis/connect-kinesis/plugins/output"
)

// exampleStream builds the example config name with env for its variables.
func exampleStream(t *testing.T, name string, env map[string]string) *service.Stream {
	t.Helper()
	yaml, err := os.ReadFile(filepath.Join("..", "..", "config", "examples", name))
	require.NoError(t, err)
	b := service.NewStreamBuilder()
	b.SetEnvVarLookupFunc(func(k string) (string, bool) { v, ok := env[k]; return v, ok })
	require.NoError(t, b.SetYAML(string(yaml)))
	require.NoError(t, b.SetLoggerYAML("level: "+os.Getenv("EXAMPLE_LOG_LEVEL")+"warn"))
	s, err := b.Build()
	require.NoError(t, err)
	return s
}

// lines reads a JSON-lines file; a missing file has none.
func lines(t *testing.T, path string) []map[string]any {
	f, err := os.Open(path)
	if os.IsNotExist(err) {
		return nil
	}
	require.NoError(t, err)
	defer f.Close()
	var out []map[string]any
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		var m map[string]any
		if json.Unmarshal(sc.Bytes(), &m) == nil {
			out = append(out, m)
		}
	}
	return out
}

// The two dead-letter examples end to end: input_dead_letter.yaml reads
// 300 records, 3 of them poison; the 297 others reach its output and the 3
// its dead-letter file, with their metadata, after 3 failures each.
// replay_dead_letter.yaml then writes those 3 into a stream again, each
// with its own data and partition key, and ends by itself.
func TestIntegrationDeadLetterExamplesReplay(t *testing.T) {
	t.Parallel()
	emu := testenv.NewKinesisMock(t)
	red := testenv.NewRedis(t)
	emu.MustCreateStream(t, "orders", 2)
	const n = 300
	keys, payloads := make([]string, n), make([]string, n)
	poison := map[string]string{} // data -> key
	for i := range n {
		keys[i], payloads[i] = fmt.Sprintf("customer-%d", i%7), fmt.Sprintf(`{"order":%d}`, i)
		if i%100 == 50 {
			payloads[i] = fmt.Sprintf(`{"order":%d,"poison":true}`, i)
			poison[payloads[i]] = keys[i]
		}
	}
	putRecords(t, emu.Client(), "orders", keys, payloads)

	dir := t.TempDir()
	out, dlq := filepath.Join(dir, "orders.jsonl"), filepath.Join(dir, "dead-letter.jsonl")
	env := map[string]string{
		"KINESIS_STREAM": "orders", "KINESIS_ENDPOINT": emu.Endpoint, "REDIS_URL": red.URL(),
		"OUT_PATH": out, "DLQ_PATH": dlq, "AWS_REGION": testenv.Region,
	}
	reader := exampleStream(t, "input_dead_letter.yaml", env)
	done := make(chan error, 1)
	go func() { done <- reader.Run(context.Background()) }()
	require.Eventually(t, func() bool {
		return len(lines(t, out)) == n-len(poison) && len(lines(t, dlq)) == len(poison)
	}, 90*time.Second, 200*time.Millisecond, "output %d lines, dead letter %d", len(lines(t, out)), len(lines(t, dlq)))
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	require.NoError(t, reader.Stop(ctx))
	<-done

	for _, m := range lines(t, out) {
		assert.Nil(t, m["poison"], "a poison record reached the output")
	}
	for _, m := range lines(t, dlq) {
		data, err := base64.StdEncoding.DecodeString(m["data"].(string))
		require.NoError(t, err)
		key, ok := poison[string(data)]
		require.True(t, ok, "%s is not a poison record", data)
		assert.Equal(t, key, m["partition_key"])
		assert.Equal(t, "orders", m["stream"])
		assert.NotEmpty(t, m["shard"])
		assert.NotEmpty(t, m["sequence_number"])
		assert.Equal(t, "3", m["failed_attempts"])
		assert.Equal(t, "max_attempts", m["reason"])
		assert.Contains(t, m["last_error"], "can never be processed")
	}

	emu.MustCreateStream(t, "orders-replayed", 1)
	env["KINESIS_STREAM"] = "orders-replayed"
	replay := exampleStream(t, "replay_dead_letter.yaml", env)
	rctx, rcancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer rcancel()
	require.NoError(t, replay.Run(rctx), "the replay ends by itself at the end of the file")
	got, err := producertest.ReadAll(t.Context(), emu.Client(), "orders-replayed")
	require.NoError(t, err)
	replayed := map[string]string{}
	for _, r := range got {
		replayed[string(r.Data)] = *r.PartitionKey
	}
	assert.Equal(t, poison, replayed, "each dead-lettered record is in the stream again, once, with its key")
	t.Logf("%d records read, %d dead-lettered, %d replayed", n, len(lines(t, dlq)), len(got))
}
