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
	"gopkg.in/yaml.v3"
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
			name := filepath.Base(page) + ":" + strconv.Itoa(start+1)
			if notLinted.MatchString(prev) {
				if m := needsBuild.FindStringSubmatch(prev); m != nil {
					checkNeedsBuild(t, dir, name, strings.Join(block, "\n")+"\n", strings.Fields(strings.ReplaceAll(m[1], ",", " ")))
					linted++
				}
				continue
			}
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

// needsBuild is a marker that says which components a block needs that
// this binary lacks: `<!-- not linted: needs a build with aws_s3, ... -->`
// (the components first, separated by commas; "e.g." after them is not
// one).
var needsBuild = regexp.MustCompile(`^<!--\s*not linted:\s*needs a build with ([a-z0-9_]+(?:,\s*[a-z0-9_]+)*)(?:[\s,]|-->|$)`)

// inferFailure is lint's refusal of a component this binary lacks.
var inferFailure = regexp.MustCompile(`\((\d+),(\d+)\) unable to infer (\w+) type from candidates: \[(\w+)\]`)

// standIns are components of this binary that take the place of one it
// lacks, by kind, so the rest of a block is linted.
var standIns = map[string]string{"output": "drop", "input": "stdin", "processor": "noop", "cache": "memory", "rate_limit": "local"}

// checkNeedsBuild guards a block marked as needing another build: each
// component the marker names must really be missing here (else the block
// must lint as it is), and the block must lint in this binary once every
// one of them is replaced by a stand-in of its kind, so that only those
// components are left unchecked. Lint stops at the first component it
// cannot resolve, so they are replaced one at a time.
func checkNeedsBuild(t *testing.T, dir, name, block string, comps []string) {
	t.Helper()
	have := map[string]bool{}
	for _, kind := range []string{"inputs", "outputs", "processors", "caches", "rate-limits"} {
		out, err := exec.CommandContext(t.Context(), binary, "list", kind).CombinedOutput()
		require.NoError(t, err, "%s", out)
		for _, l := range strings.Split(string(out), "\n") {
			if c, ok := strings.CutPrefix(strings.TrimSpace(l), "- "); ok {
				have[c] = true
			}
		}
	}
	named := map[string]bool{}
	for _, c := range comps {
		assert.False(t, have[c], "%s: the marker says the block needs a build with %s, but this binary has it: lint it here (drop the marker)", name, c)
		named[c] = true
	}
	file := filepath.Join(dir, strings.NewReplacer(".md:", "-", ".", "-").Replace(name)+".yaml")
	for range 10 {
		require.NoError(t, os.WriteFile(file, []byte(block), 0o644))
		cmd := exec.CommandContext(t.Context(), binary, "lint", file)
		cmd.Env = append(os.Environ(), "REDIS_PASSWORD=x", "AWS_REGION=us-east-1", "POD_NAME=x")
		out, err := cmd.CombinedOutput()
		if err == nil {
			return
		}
		m := inferFailure.FindStringSubmatch(string(out))
		if m == nil || !named[m[4]] {
			assert.Fail(t, "the block does not lint", "%s: with the components its marker names (%s) replaced by stand-ins, the block lints in this binary; it does not, so it would not lint in the build it names either:\n%s", name, strings.Join(comps, ", "), out)
			return
		}
		line, _ := strconv.Atoi(m[1])
		col, _ := strconv.Atoi(m[2])
		var err2 error
		block, err2 = replaceComponent(block, line, col, m[4], standIns[m[3]])
		require.NoError(t, err2, "%s", name)
	}
	t.Errorf("%s: still does not lint after 10 replacements", name)
}

// replaceComponent replaces the component comp of the mapping at line:col
// of block by stand-in (with an empty config).
func replaceComponent(block string, line, col int, comp, standIn string) (string, error) {
	if standIn == "" {
		return "", fmt.Errorf("no stand-in for %s", comp)
	}
	var doc yaml.Node
	if err := yaml.Unmarshal([]byte(block), &doc); err != nil {
		return "", err
	}
	var found bool
	var walk func(n *yaml.Node)
	walk = func(n *yaml.Node) {
		if n.Kind == yaml.MappingNode && n.Line == line && n.Column == col {
			for i := 0; i+1 < len(n.Content); i += 2 {
				if n.Content[i].Value == comp {
					n.Content[i].Value = standIn
					n.Content[i+1] = &yaml.Node{Kind: yaml.MappingNode, Tag: "!!map", Style: yaml.FlowStyle}
					found = true
				}
			}
		}
		for _, c := range n.Content {
			walk(c)
		}
	}
	walk(&doc)
	if !found {
		return "", fmt.Errorf("no %s at %d:%d", comp, line, col)
	}
	out, err := yaml.Marshal(&doc)
	return string(out), err
}

// Guards a README that does not say what the binary holds: every input
// and output `list` prints is named in README.md's "What the binary
// includes", and the section names none it lacks.
func TestReadmeListsTheBinarysInputsAndOutputs(t *testing.T) {
	t.Parallel()
	b, err := os.ReadFile("../../README.md")
	require.NoError(t, err)
	_, section, ok := strings.Cut(string(b), "## What the binary includes\n")
	require.True(t, ok, "README.md has the section")
	section, _, _ = strings.Cut(section, "\n## ")
	for _, kind := range []string{"inputs", "outputs"} {
		out, err := exec.CommandContext(t.Context(), binary, "list", kind).CombinedOutput()
		require.NoError(t, err, "%s", out)
		m := regexp.MustCompile(`(?m)^- ` + kind + `: (.*(?:\n  .*)*)`).FindStringSubmatch(section)
		require.NotNil(t, m, "the section lists the %s", kind)
		var listed []string
		for _, c := range regexp.MustCompile("`([a-z_]+)`").FindAllStringSubmatch(m[1], -1) {
			listed = append(listed, c[1])
		}
		var have []string
		for _, l := range strings.Split(string(out), "\n") {
			if c, ok := strings.CutPrefix(strings.TrimSpace(l), "- "); ok {
				have = append(have, c)
			}
		}
		assert.ElementsMatch(t, have, listed, "README.md's %s are the binary's", kind)
	}
}
