package main

import (
	"fmt"
	"runtime"
	"runtime/debug"
	"strings"
)

// Set at build time by the Makefile: -ldflags "-X main.version=... -X
// main.commit=... -X main.dateBuilt=...". A plain `go build` leaves them
// empty and buildInfo falls back to what the Go toolchain recorded.
var (
	version   = ""
	commit    = ""
	dateBuilt = ""
)

const benthosModule = "github.com/redpanda-data/benthos/v4"

// build is what `connect-kinesis --version` prints.
type build struct {
	Version, Commit, Date, Go, Benthos, Platform string
}

// buildInfo gathers the version lines from the ldflags and the build
// information the Go toolchain embeds (module versions, VCS revision), so
// even a binary built with plain `go build` or `go install` says which
// commit and which Benthos it holds.
func buildInfo() build {
	info, _ := debug.ReadBuildInfo()
	return resolveBuild(build{Version: version, Commit: commit, Date: dateBuilt}, info)
}

// resolveBuild fills what the ldflags left empty from info (nil when the
// binary has none).
func resolveBuild(b build, info *debug.BuildInfo) build {
	b.Go, b.Benthos, b.Platform = runtime.Version(), "unknown", runtime.GOOS+"/"+runtime.GOARCH
	if info != nil {
		for _, d := range info.Deps {
			if d.Path == benthosModule {
				b.Benthos = d.Version
				if d.Replace != nil && d.Replace.Version != "" {
					b.Benthos = d.Replace.Version
				}
			}
		}
		for _, s := range info.Settings {
			switch {
			case s.Key == "vcs.revision" && b.Commit == "":
				b.Commit = s.Value
			case s.Key == "vcs.time" && b.Date == "":
				b.Date = s.Value
			}
		}
	}
	if b.Commit == "" {
		b.Commit = "unknown"
	}
	if b.Date == "" {
		b.Date = "unknown"
	}
	if b.Version == "" && info != nil && info.Main.Version != "" && info.Main.Version != "(devel)" {
		// `go install .../cmd/connect-kinesis@v0.9.0` records the module's
		// version; a plain `go build` in a checkout records a pseudo-version.
		b.Version = strings.TrimPrefix(info.Main.Version, "v")
	}
	if b.Version == "" {
		// No version at all: a pre-release of 0.0.0 naming the commit, which
		// sorts below every release.
		b.Version = "0.0.0-" + shortCommit(b.Commit)
	}
	return b
}

func shortCommit(c string) string {
	if len(c) > 12 {
		return c[:12]
	}
	return c
}

func (b build) String() string {
	var s strings.Builder
	for _, l := range [][2]string{{"Version", b.Version}, {"Commit", b.Commit}, {"Date", b.Date},
		{"Go", b.Go}, {"Benthos", b.Benthos}, {"Platform", b.Platform}} {
		fmt.Fprintf(&s, "%-9s %s\n", l[0]+":", l[1])
	}
	return s.String()
}

// wantsVersion reports whether the command line asks for the version:
// `--version` or `-v` among the flags before a subcommand or config file.
// Benthos would print only its two lines (version, date) for it.
func wantsVersion(args []string) bool {
	for _, a := range args {
		if !strings.HasPrefix(a, "-") {
			return false
		}
		switch a {
		case "-v", "--v", "-version", "--version":
			return true
		}
	}
	return false
}
