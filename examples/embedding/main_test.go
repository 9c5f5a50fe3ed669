package main

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// pipeline reads a stream with a dead letter and writes to a file: the
// plugins' fields, resolved by a build of this example.
const pipeline = `
input:
  kinesis:
    streams: [ orders ]
    region: us-east-1
    checkpoint:
      redis: { url: redis://localhost:6379 }
      group: orders-archive
    redelivery:
      max_attempts: 5
      dead_letter: orders_dlq
output:
  file: { path: ./orders.jsonl, codec: lines }
output_resources:
  - label: orders_dlq
    file: { path: ./orders-dlq.jsonl, codec: lines }
metrics:
  prometheus: {}
`

// Guards the README's promise that the plugins embed in a Benthos build of
// one's own: this example builds, lists the kinesis input and output and
// the exporter next to Benthos' core components, and lints a pipeline that
// uses them.
func TestEmbeddingExampleBuildsAndLints(t *testing.T) {
	dir := t.TempDir()
	bin := filepath.Join(dir, "embedding")
	build := exec.CommandContext(t.Context(), "go", "build", "-o", bin, ".")
	build.Env = append(os.Environ(), "CGO_ENABLED=0")
	out, err := build.CombinedOutput()
	require.NoError(t, err, "%s", out)

	for kind, want := range map[string][]string{
		"inputs":  {"kinesis", "generate", "file"},
		"outputs": {"kinesis", "file", "http_client", "drop"},
		"metrics": {"kinesis_prometheus", "prometheus"},
	} {
		out, err := exec.CommandContext(t.Context(), bin, "list", kind).CombinedOutput()
		require.NoError(t, err, "%s", out)
		for _, c := range want {
			assert.Contains(t, string(out), "- "+c+"\n", "list %s", kind)
		}
	}

	conf := filepath.Join(dir, "pipeline.yaml")
	require.NoError(t, os.WriteFile(conf, []byte(pipeline), 0o600))
	out, err = exec.CommandContext(t.Context(), bin, "lint", conf).CombinedOutput()
	assert.NoError(t, err, "the pipeline lints in the example's build:\n%s", out)
	assert.Empty(t, strings.TrimSpace(string(out)))
}
