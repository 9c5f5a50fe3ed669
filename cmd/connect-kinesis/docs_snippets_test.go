package main

import (
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

// notLinted is the marker a guide puts on the line before a YAML block
// that is not a whole config for this binary (a fragment, or a file for
// another tool or build); the docs check (internal/cmd/docgen) requires
// the reason.
var notLinted = regexp.MustCompile(`^<!--\s*not linted:`)

// Guards config examples in the guides that no longer lint (a renamed
// field, a removed default): every YAML block of README.md and docs/*.md
// not marked `<!-- not linted: why -->` lints clean in this binary.
func TestDocsYAMLSnippetsLint(t *testing.T) {
	t.Parallel()
	pages, err := filepath.Glob("../../docs/*.md")
	require.NoError(t, err)
	pages = append(pages, "../../README.md")
	dir := t.TempDir()
	linted := 0
	for _, page := range pages {
		b, err := os.ReadFile(page)
		require.NoError(t, err)
		lines := strings.Split(string(b), "\n")
		for i := 0; i < len(lines); i++ {
			if !regexp.MustCompile("^```ya?ml\\s*$").MatchString(lines[i]) {
				continue
			}
			start := i
			var block []string
			for i++; i < len(lines) && !strings.HasPrefix(lines[i], "```"); i++ {
				block = append(block, lines[i])
			}
			prev := ""
			for j := start - 1; j >= 0; j-- {
				if strings.TrimSpace(lines[j]) != "" {
					prev = strings.TrimSpace(lines[j])
					break
				}
			}
			if notLinted.MatchString(prev) {
				continue
			}
			name := filepath.Base(page) + ":" + strconv.Itoa(start+1)
			file := filepath.Join(dir, strings.NewReplacer(".md:", "-", ".", "-").Replace(name)+".yaml")
			require.NoError(t, os.WriteFile(file, []byte(strings.Join(block, "\n")+"\n"), 0o644))
			cmd := exec.CommandContext(t.Context(), binary, "lint", file)
			// The examples name secrets by environment variable.
			cmd.Env = append(os.Environ(), "REDIS_PASSWORD=x", "AWS_REGION=us-east-1", "POD_NAME=x")
			out, err := cmd.CombinedOutput()
			assert.NoError(t, err, "%s: the YAML block lints in this binary, or is marked `<!-- not linted: why -->`:\n%s", name, out)
			linted++
		}
	}
	assert.Positive(t, linted, "the guides hold configs to lint")
}
