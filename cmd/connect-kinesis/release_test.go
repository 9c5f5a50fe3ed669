package main

import (
	"archive/tar"
	"bufio"
	"bytes"
	"compress/gzip"
	"crypto/sha256"
	"debug/macho"
	"encoding/hex"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// releasePlatforms are the archives `make release` writes (Makefile
// PLATFORMS).
var releasePlatforms = []string{"linux/amd64", "linux/arm64", "darwin/amd64", "darwin/arm64"}

// untar extracts a .tar.gz into dir and returns its entries' names.
func untar(t *testing.T, archive, dir string) []string {
	t.Helper()
	f, err := os.Open(archive)
	require.NoError(t, err)
	defer f.Close()
	gz, err := gzip.NewReader(f)
	require.NoError(t, err, "%s is gzipped", archive)
	tr := tar.NewReader(gz)
	var names []string
	for {
		h, err := tr.Next()
		if err == io.EOF {
			return names
		}
		require.NoError(t, err)
		names = append(names, h.Name)
		if h.Typeflag != tar.TypeReg {
			continue
		}
		require.False(t, strings.Contains(h.Name, ".."), "entry %s stays inside the archive", h.Name)
		path := filepath.Join(dir, h.Name)
		require.NoError(t, os.MkdirAll(filepath.Dir(path), 0o755))
		out, err := os.OpenFile(path, os.O_CREATE|os.O_WRONLY, os.FileMode(h.Mode))
		require.NoError(t, err)
		_, err = io.Copy(out, tr)
		require.NoError(t, err)
		require.NoError(t, out.Close())
	}
}

// TestReleaseArchives checks what `make release` wrote to dist/ (named in
// CONNECT_KINESIS_DIST by `make test-release`): one archive per platform,
// each holding README.md, LICENSE, docs/ and a binary built for that
// platform (its ELF or Mach-O header names the OS's format and the CPU; a
// Linux one is static; it is dated by the commit), and SHA256SUMS matching
// every archive.
func TestReleaseArchives(t *testing.T) {
	dist := os.Getenv("CONNECT_KINESIS_DIST")
	if dist == "" {
		t.Skip("no release to check: `make test-release` builds dist/ and names it in CONNECT_KINESIS_DIST")
	}
	t.Parallel()
	sums := map[string]string{}
	f, err := os.Open(filepath.Join(dist, "SHA256SUMS"))
	require.NoError(t, err)
	defer f.Close()
	for sc := bufio.NewScanner(f); sc.Scan(); {
		sum, name, ok := strings.Cut(sc.Text(), "  ")
		require.True(t, ok, "SHA256SUMS line %q is `<sum>  <file>` (sha256sum -c reads it)", sc.Text())
		sums[name] = sum
	}

	gitOut := func(args ...string) string {
		cmd := exec.CommandContext(t.Context(), "git", args...)
		cmd.Env = append(os.Environ(), "TZ=UTC")
		out, err := cmd.Output()
		require.NoError(t, err, "git %v", args)
		return strings.TrimSpace(string(out))
	}
	repoDocs := strings.Fields(gitOut("-C", "../..", "ls-files", "docs"))
	slices.Sort(repoDocs)

	var names []string
	for _, p := range releasePlatforms {
		goos, goarch, _ := strings.Cut(p, "/")
		name := "connect-kinesis_" + wantVersion + "_" + goos + "_" + goarch
		names = append(names, name+".tar.gz")
		t.Run(goos+"_"+goarch, func(t *testing.T) {
			archive := filepath.Join(dist, name+".tar.gz")
			raw, err := os.ReadFile(archive)
			require.NoError(t, err, "make release writes %s", filepath.Base(archive))
			sum := sha256.Sum256(raw)
			assert.Equal(t, hex.EncodeToString(sum[:]), sums[name+".tar.gz"], "SHA256SUMS lists the archive's digest")

			dir := t.TempDir()
			entries := untar(t, archive, dir)
			var top, docs []string
			for _, e := range entries {
				if rest, ok := strings.CutPrefix(e, name+"/docs/"); ok {
					if rest != "" && !strings.HasSuffix(rest, "/") {
						docs = append(docs, "docs/"+rest)
					}
					continue
				}
				top = append(top, e)
			}
			slices.Sort(top)
			slices.Sort(docs)
			assert.Equal(t, []string{name + "/", name + "/LICENSE", name + "/README.md", name + "/connect-kinesis"}, top)
			// The binary's help and the README send the reader to docs/:
			// the archive holds every page the repository does.
			assert.Equal(t, repoDocs, docs, "the archive holds the repository's docs/")
			for _, doc := range append([]string{"LICENSE", "README.md"}, docs...) {
				got, err := os.ReadFile(filepath.Join(dir, name, doc))
				require.NoError(t, err)
				want, err := os.ReadFile(filepath.Join("../..", doc))
				require.NoError(t, err)
				assert.True(t, bytes.Equal(want, got), "%s is the repository's", doc)
			}
			bin := filepath.Join(dir, name, "connect-kinesis")
			switch goos {
			case "linux":
				requireStaticELF(t, bin, elfMachines[goarch])
			case "darwin":
				m, err := macho.Open(bin)
				require.NoError(t, err, "the darwin binary is Mach-O")
				defer m.Close()
				assert.Equal(t, machoCPUs[goarch], m.Cpu)
				assert.Equal(t, macho.TypeExec, m.Type)
			}
			if goos == runtime.GOOS && goarch == runtime.GOARCH {
				out, err := exec.CommandContext(t.Context(), bin, "--version").CombinedOutput()
				require.NoError(t, err, "%s", out)
				assert.Equal(t, wantVersion, versionLines(string(out))["Version"], "the archive's binary is this version")
				v := versionLines(string(out))
				commitDate := gitOut("log", "-1", "--date=format-local:%Y-%m-%dT%H:%M:%SZ", "--format=%cd", v["Commit"])
				assert.Equal(t, commitDate, v["Date"], "the archive's binary is dated by its commit, so a rebuild is the same")
			}
		})
	}
	var listed []string
	for n := range sums {
		listed = append(listed, n)
	}
	slices.Sort(listed)
	slices.Sort(names)
	assert.Equal(t, names, listed, "SHA256SUMS lists exactly the archives")
}
