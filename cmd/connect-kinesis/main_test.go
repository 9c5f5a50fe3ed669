package main

import (
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/connect-kinesis/connect-kinesis/internal/testenv"
)

// binary is the connect-kinesis under test; wantVersion and wantDate are
// what its --version must print.
var binary, wantVersion, wantDate = "", "v9.9.9-test", "2026-01-02"

// TestMain builds the real binary once, with version flags, so the tests
// exercise what users run. `make test` has just built bin/connect-kinesis
// with its own flags and names it in CONNECT_KINESIS_BIN (with the version
// and date it stamped), so the tests use that one instead of linking another.
func TestMain(m *testing.M) {
	if bin := os.Getenv("CONNECT_KINESIS_BIN"); bin != "" {
		binary = bin
		wantVersion, wantDate = os.Getenv("CONNECT_KINESIS_BIN_VERSION"), os.Getenv("CONNECT_KINESIS_BIN_DATE")
		if wantVersion == "" || wantDate == "" {
			fmt.Fprintln(os.Stderr, "CONNECT_KINESIS_BIN needs CONNECT_KINESIS_BIN_VERSION and CONNECT_KINESIS_BIN_DATE")
			os.Exit(1)
		}
		code := m.Run()
		testenv.CloseShared()
		removeE2EHookBinary()
		os.Exit(code)
	}
	dir, err := os.MkdirTemp("", "connect-kinesis-bin-")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	binary = filepath.Join(dir, "connect-kinesis")
	// As `make build` builds it: static, no cgo (TestBinaryIsStatic).
	ldflags := "-X main.version=" + wantVersion + " -X main.dateBuilt=" + wantDate
	build := exec.Command("go", "build", "-trimpath", "-ldflags", ldflags, "-o", binary, ".")
	build.Env = append(os.Environ(), "CGO_ENABLED=0")
	build.Stdout, build.Stderr = os.Stdout, os.Stderr
	if err := build.Run(); err != nil {
		fmt.Fprintln(os.Stderr, "building connect-kinesis:", err)
		os.Exit(1)
	}
	code := m.Run()
	testenv.CloseShared()
	removeE2EHookBinary()
	os.RemoveAll(dir)
	os.Exit(code)
}

func run(t *testing.T, args ...string) string {
	t.Helper()
	out, err := exec.CommandContext(t.Context(), binary, args...).CombinedOutput()
	require.NoError(t, err, "connect-kinesis %s:\n%s", strings.Join(args, " "), out)
	return string(out)
}

func TestVersionFromLdflags(t *testing.T) {
	t.Parallel()
	out := run(t, "--version")
	assert.Contains(t, out, wantVersion)
	assert.Contains(t, out, wantDate)
}

func TestListShowsThisProjectsPlugins(t *testing.T) {
	t.Parallel()
	out := run(t, "list", "--format", "json", "inputs", "outputs", "metrics")
	for _, want := range []string{`"kinesis"`, `"prometheus"`, `"kinesis_prometheus"`, `"generate"`, `"stdout"`} {
		assert.Contains(t, out, want)
	}
	assert.NotContains(t, out, `"aws_kinesis"`, "no collision with Redpanda Connect's name")
}

func TestCheckpointsCommandIsWired(t *testing.T) {
	t.Parallel()
	out := run(t, "checkpoints", "--help")
	for _, sub := range []string{"show", "reset", "delete"} {
		assert.Contains(t, out, sub)
	}
	out = run(t, "consumers", "--help")
	for _, sub := range []string{"list", "deregister"} {
		assert.Contains(t, out, sub)
	}
}

// The binary serves Prometheus text at the HTTP server's /metrics with
// counters, gauges and timers and their labels.
func TestPrometheusScrape(t *testing.T) {
	t.Parallel()
	port, err := testenv.FreePort()
	require.NoError(t, err)
	config := filepath.Join(t.TempDir(), "scrape.yaml")
	require.NoError(t, os.WriteFile(config, []byte(fmt.Sprintf(`
http:
  address: 127.0.0.1:%d
input:
  label: gen
  generate:
    count: 0
    interval: 5ms
    mapping: 'root = {"n": counter()}'
pipeline:
  processors:
    - metric:
        type: gauge
        name: last_n
        labels: { source: gen }
        value: '${! json("n") }'
output:
  label: sink
  drop: {}
metrics:
  prometheus: {}
`, port)), 0o600))
	cmd := exec.CommandContext(t.Context(), binary, "-c", config)
	require.NoError(t, testenv.StartCommand("connect-kinesis", cmd))
	t.Cleanup(func() { _ = cmd.Process.Kill(); _ = cmd.Wait() })

	var body string
	require.Eventually(t, func() bool {
		resp, err := http.Get(fmt.Sprintf("http://127.0.0.1:%d/metrics", port))
		if err != nil {
			return false
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		body = string(b)
		return resp.StatusCode == http.StatusOK && strings.Contains(body, "output_sent{")
	}, 30*time.Second, 100*time.Millisecond)
	assert.Contains(t, body, "# TYPE input_received counter")
	assert.Contains(t, body, `input_received{label="gen",path="root.input"}`)
	assert.Contains(t, body, "# TYPE last_n gauge")
	assert.Contains(t, body, `source="gen"`)
	assert.Contains(t, body, "# TYPE output_latency_seconds summary")
	assert.Contains(t, body, "go_goroutines")
}

func TestLintRejectsUnknownField(t *testing.T) {
	t.Parallel()
	config := filepath.Join(t.TempDir(), "bad.yaml")
	require.NoError(t, os.WriteFile(config, []byte("input:\n  generate:\n    mapping: 'root = 1'\n    nope: true\noutput:\n  drop: {}\n"), 0o600))
	out, err := exec.CommandContext(t.Context(), binary, "lint", config).CombinedOutput()
	require.Error(t, err)
	assert.Contains(t, string(out), "nope")
}
