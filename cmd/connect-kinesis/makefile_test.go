package main

import (
	"os"
	"os/exec"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// makeIn runs make in the repository's root with PATH set to path
// (unchanged when empty) and returns its output and error.
func makeIn(t *testing.T, path string, args ...string) (string, error) {
	t.Helper()
	mk, err := exec.LookPath("make")
	if err != nil {
		t.Skip("no make")
	}
	cmd := exec.CommandContext(t.Context(), mk, append([]string{"-C", "../.."}, args...)...)
	if path != "" {
		cmd.Env = append(os.Environ(), "PATH="+path)
	}
	out, err := cmd.CombinedOutput()
	return string(out), err
}

// Each target installs only what it needs (issue 39 item 15: `make demo`
// installed prometheus), and a user who is not root is told the command to
// run instead of seeing apt-get fail on its lock file.
func TestMakeInstallsOnlyWhatATargetNeeds(t *testing.T) {
	t.Parallel()
	out, err := makeIn(t, "", "-n", "demo")
	require.NoError(t, err, out)
	assert.NotContains(t, out, "prometheus", "make demo needs no Prometheus")
	out, err = makeIn(t, "", "-n", "test")
	require.NoError(t, err, out)
	assert.Contains(t, out, "prometheus", "make test still installs everything it needs")
	assert.Contains(t, out, "redis-server")

	// A PATH with a shell, an id that says uid 1000 and an apt-get, but no
	// redis-server.
	bin := t.TempDir()
	for _, tool := range []string{"bash", "env"} {
		p, err := exec.LookPath(tool)
		require.NoError(t, err)
		require.NoError(t, os.Symlink(p, filepath.Join(bin, tool)))
	}
	require.NoError(t, os.WriteFile(filepath.Join(bin, "id"), []byte("#!/bin/sh\necho 1000\n"), 0o755))
	require.NoError(t, os.WriteFile(filepath.Join(bin, "apt-get"), []byte("#!/bin/sh\necho 'E: Could not open lock file' >&2\nexit 100\n"), 0o755))
	out, err = makeIn(t, bin, "deps-redis")
	require.Error(t, err)
	assert.Contains(t, out, "deps: redis-server and redis-cli needs redis-server; install it as root, e.g. sudo apt-get install -y redis-server, then run make again")
	assert.NotContains(t, out, "lock file", "apt-get is not run as a user")
}
