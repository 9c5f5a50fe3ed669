package main

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
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

// changelogRelease is the newest released version CHANGELOG.md names
// (`## [0.9.0] - date`), and the patch after it.
func changelogRelease(t *testing.T, path string) (release, next string) {
	t.Helper()
	b, err := os.ReadFile(path)
	require.NoError(t, err)
	m := regexp.MustCompile(`(?m)^## \[(\d+)\.(\d+)\.(\d+)\] - \d{4}-\d{2}-\d{2}$`).FindStringSubmatch(string(b))
	require.NotNil(t, m, "%s has a released heading `## [x.y.z] - yyyy-mm-dd`", path)
	patch, err := strconv.Atoi(m[3])
	require.NoError(t, err)
	return m[1] + "." + m[2] + "." + m[3], fmt.Sprintf("%s.%s.%d", m[1], m[2], patch+1)
}

// versionFrom matches a version derived from CHANGELOG.md's newest release:
// the release itself, or a pre-release of the next patch naming the commit.
func versionFrom(release, next string) *regexp.Regexp {
	return regexp.MustCompile(`^(` + regexp.QuoteMeta(release) + `|` + regexp.QuoteMeta(next) + `-dev\.\d+\.g[0-9a-f]{12}(\.dirty)?)$`)
}

// Guards a binary whose --version is not taken from CHANGELOG.md (it was
// 0.0.0-<commit> whatever the changelog said): the version `make` stamps,
// and the one the binary `make test` built prints, derive from the newest
// release the changelog names.
func TestVersionMatchesChangelog(t *testing.T) {
	t.Parallel()
	release, next := changelogRelease(t, "../../CHANGELOG.md")
	out, err := makeIn(t, "", "-s", "version")
	require.NoError(t, err, out)
	assert.Regexp(t, versionFrom(release, next), strings.TrimSpace(out), "make version")
	if os.Getenv("CONNECT_KINESIS_BIN") != "" {
		// `make test` built the binary with the Makefile's VERSION.
		assert.Regexp(t, versionFrom(release, next), versionLines(run(t, "--version"))["Version"], "--version")
	}
}

// Guards versions that sort wrongly or cannot tag an image: in a scratch
// repository, a commit tagged as the changelog's release builds exactly
// that version; a later commit, or uncommitted changes, build a
// pre-release of the next patch counting the commits since the release,
// with no `+` (OCI image tags do not allow it).
func TestVersionFollowsTheReleaseTag(t *testing.T) {
	t.Parallel()
	if _, err := exec.LookPath("git"); err != nil {
		t.Skip("no git")
	}
	dir := t.TempDir()
	mk, err := os.ReadFile("../../Makefile")
	require.NoError(t, err)
	require.NoError(t, os.WriteFile(filepath.Join(dir, "Makefile"), mk, 0o644))
	require.NoError(t, os.WriteFile(filepath.Join(dir, "CHANGELOG.md"),
		[]byte("# Changelog\n\n## [Unreleased]\n\n## [0.9.0] - 2026-12-05\n\n- first\n\n## [0.8.3] - 2026-11-01\n"), 0o644))
	git := func(args ...string) string {
		cmd := exec.CommandContext(t.Context(), "git", append([]string{"-C", dir, "-c", "user.name=t", "-c", "user.email=t@t", "-c", "commit.gpgsign=false", "-c", "tag.gpgsign=false"}, args...)...)
		out, err := cmd.CombinedOutput()
		require.NoError(t, err, "git %v: %s", args, out)
		return strings.TrimSpace(string(out))
	}
	version := func() string {
		out, err := exec.CommandContext(t.Context(), "make", "-s", "-C", dir, "version").CombinedOutput()
		require.NoError(t, err, string(out))
		return strings.TrimSpace(string(out))
	}
	git("init", "-q")
	git("add", ".")
	git("commit", "-q", "-m", "release 0.9.0")
	short := func() string { return git("rev-parse", "--short=12", "HEAD") }
	assert.Equal(t, "0.9.1-dev.0.g"+short(), version(), "not tagged yet: not the release")
	git("tag", "v0.9.0")
	assert.Equal(t, "0.9.0", version(), "the tagged commit is the release")
	require.NoError(t, os.WriteFile(filepath.Join(dir, "x"), []byte("x"), 0o644))
	git("add", "x")
	assert.Equal(t, "0.9.1-dev.0.g"+short()+".dirty", version(), "uncommitted changes are not the release")
	git("commit", "-q", "-m", "after")
	git("commit", "-q", "--allow-empty", "-m", "after again")
	v := version()
	assert.Equal(t, "0.9.1-dev.2.g"+short(), v, "two commits after the release")
	assert.Regexp(t, `^[A-Za-z0-9_][A-Za-z0-9_.-]{0,127}$`, v, "an OCI image tag")
}
