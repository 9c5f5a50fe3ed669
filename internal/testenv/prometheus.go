package testenv

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"time"
)

// Prometheus is a running Prometheus server (Debian package `prometheus`,
// installed by `make deps`).
type Prometheus struct {
	// URL is the server's base URL, http://127.0.0.1:port.
	URL string
	// Dir holds prometheus.yml and the TSDB.
	Dir  string
	proc *Process
}

// StartPrometheus starts prometheus on a free port with config as its
// prometheus.yml, its data in a new temporary folder. Paths in config (rule
// files) must be absolute.
func StartPrometheus(ctx context.Context, config string) (*Prometheus, error) {
	return retryStart(func() (*Prometheus, error) { return startPrometheus(ctx, config) })
}

func startPrometheus(ctx context.Context, config string) (*Prometheus, error) {
	prog, err := lookPath("prometheus")
	if err != nil {
		return nil, err
	}
	port, err := FreePort()
	if err != nil {
		return nil, err
	}
	dir, err := os.MkdirTemp("", "connect-kinesis-prometheus-")
	if err != nil {
		return nil, err
	}
	file := filepath.Join(dir, "prometheus.yml")
	if err := os.WriteFile(file, []byte(config), 0o600); err != nil {
		_ = os.RemoveAll(dir)
		return nil, err
	}
	p, err := startProcess("prometheus", nil, dir, prog,
		"--config.file="+file,
		"--storage.tsdb.path="+filepath.Join(dir, "data"),
		"--web.listen-address="+fmt.Sprintf("127.0.0.1:%d", port),
		"--log.level=warn")
	if err != nil {
		_ = os.RemoveAll(dir)
		return nil, err
	}
	s := &Prometheus{URL: fmt.Sprintf("http://127.0.0.1:%d", port), Dir: dir, proc: p}
	if err := waitReady(ctx, p, 30*time.Second, func(ctx context.Context) error {
		return httpOK(ctx, s.URL+"/-/ready")
	}); err != nil {
		_ = os.RemoveAll(dir)
		return nil, err
	}
	return s, nil
}

// Output returns what the server logged so far.
func (s *Prometheus) Output() string { return s.proc.Output() }

// Close stops the server and removes its folder.
func (s *Prometheus) Close() {
	s.proc.Stop(5 * time.Second)
	_ = os.RemoveAll(s.Dir)
}

// NewPrometheus starts a Prometheus server for a test and stops it when the
// test ends; without the package it skips (fails under CI=true).
func NewPrometheus(tb testing.TB, config string) *Prometheus {
	tb.Helper()
	s, err := StartPrometheus(tb.Context(), config)
	Require(tb, "starting prometheus", err)
	tb.Cleanup(s.Close)
	return s
}
