package main

import (
	"runtime"
	"runtime/debug"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// versionLines parses `--version` output ("Key: value" lines).
func versionLines(out string) map[string]string {
	lines := map[string]string{}
	for _, l := range strings.Split(strings.TrimSpace(out), "\n") {
		k, v, _ := strings.Cut(l, ":")
		lines[k] = strings.TrimSpace(v)
	}
	return lines
}

// --version names everything a bug report needs: the release, the commit,
// the toolchain, the Benthos it embeds and the platform, whichever of the
// two flags Benthos accepts for it is used.
func TestVersionLines(t *testing.T) {
	t.Parallel()
	info, ok := debug.ReadBuildInfo()
	require.True(t, ok)
	var benthos string
	for _, d := range info.Deps {
		if d.Path == benthosModule {
			benthos = d.Version
		}
	}
	require.NotEmpty(t, benthos, "this test binary links Benthos")
	for _, flag := range []string{"--version", "-v"} {
		got := versionLines(run(t, flag))
		assert.Equal(t, wantVersion, got["Version"], flag)
		assert.Equal(t, wantDate, got["Date"], flag)
		assert.NotEmpty(t, got["Commit"], flag)
		assert.Equal(t, runtime.Version(), got["Go"], flag)
		assert.Equal(t, benthos, got["Benthos"], "%s: the Benthos module version from go.mod", flag)
		assert.Equal(t, runtime.GOOS+"/"+runtime.GOARCH, got["Platform"], flag)
	}
}

// Without a version from the ldflags (a plain `go build`), the version is a
// pre-release of 0.0.0 naming the commit Go recorded.
func TestVersionWithoutTag(t *testing.T) {
	t.Parallel()
	info := &debug.BuildInfo{
		Deps:     []*debug.Module{{Path: benthosModule, Version: "v4.60.0"}},
		Settings: []debug.BuildSetting{{Key: "vcs.revision", Value: "1e3a8a7f2b39af46413f91dc7340b2edab58ae20"}, {Key: "vcs.time", Value: "2026-12-01T00:00:00Z"}},
	}
	b := resolveBuild(build{}, info)
	assert.Equal(t, "0.0.0-1e3a8a7f2b39", b.Version)
	assert.Equal(t, "1e3a8a7f2b39af46413f91dc7340b2edab58ae20", b.Commit)
	assert.Equal(t, "2026-12-01T00:00:00Z", b.Date)
	assert.Equal(t, "v4.60.0", b.Benthos)
	assert.Equal(t, "9.9.9", resolveBuild(build{Version: "9.9.9"}, info).Version, "a tag wins")

	// Guards a `go install ...@v0.9.0` binary that printed 0.0.0-<commit>:
	// the module version Go recorded names the release.
	info.Main = debug.Module{Path: "github.com/connect-kinesis/connect-kinesis", Version: "v0.9.0"}
	assert.Equal(t, "0.9.0", resolveBuild(build{}, info).Version)
	assert.Equal(t, "9.9.9", resolveBuild(build{Version: "9.9.9"}, info).Version, "the Makefile's version wins")
}

func TestWantsVersion(t *testing.T) {
	t.Parallel()
	for args, want := range map[string]bool{
		"--version": true, "-v": true, "--log.level debug --version": false, "-c x.yaml": false,
		"run -v": false, "": false, "--chilled -v": true,
	} {
		assert.Equal(t, want, wantsVersion(strings.Fields(args)), "%q", args)
	}
}
