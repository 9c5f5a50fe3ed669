package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/redpanda-data/benthos/v4/public/service"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// Guards field docs that grew into essays (max_buffered_bytes held 518
// words): the docs check names every description over the limit.
func TestDocsCheckFailsALongFieldDescription(t *testing.T) {
	data := service.TemplateDataPlugin{Fields: []service.TemplateDataPluginField{
		{FullName: "short", Description: "Bounds the bytes in flight. See [the guide](x.md)."},
		{FullName: "long", Description: strings.Repeat("word ", maxFieldWords+1)},
		{FullName: "exact", Description: strings.Repeat("word ", maxFieldWords)},
	}}
	assert.Equal(t, []string{"inputs kinesis field long: 81 words"}, longFields("inputs", "kinesis", data))
}

// Guards this project's own specs: every field of the input, the output
// and the metrics exporter stays within the limit, so `make docs-check`
// passes on the committed specs.
func TestFieldDescriptionsWithinTheLimit(t *testing.T) {
	err := run(t.TempDir(), false)
	require.NoError(t, err)
}

// Guards links and anchors that rot (a page renamed, a heading reworded)
// and commands shown with no word on whether anything runs them: the docs
// check names each.
func TestDocsCheckFindsBrokenLinksAndUnmarkedBlocks(t *testing.T) {
	root := t.TempDir()
	write := func(p, s string) {
		require.NoError(t, os.MkdirAll(filepath.Dir(filepath.Join(root, p)), 0o755))
		require.NoError(t, os.WriteFile(filepath.Join(root, p), []byte(s), 0o644))
	}
	write("README.md", "See [tuning](docs/tuning.md#sizing-memory-max_buffered_bytes), [gone](docs/gone.md), "+
		"[bad anchor](docs/tuning.md#no-such-heading), [web](https://example.com/x.md) and `[code](nowhere.md)`.\n")
	write("CHANGELOG.md", "# Changelog\n\n[self](#changelog)\n")
	write("docs/tuning.md", "# Tuning\n\n## Sizing memory: `max_buffered_bytes`\n\n## Twice\n\n## Twice\n\n[second](#twice-1)\n\n"+
		"```sh\nmake soak\n```\n\n<!-- not run: minutes -->\n```sh\nmake soak\n```\n\n<!-- run by: TestNoSuchTest -->\n```\nmake bench\n```\n\n"+
		"<!-- run by: TestReal -->\n```sh\nmake x\n```\n\n```\nplain output\n```\n")
	write("x_test.go", "package x\n\nfunc TestReal(t *testing.T) {}\n")
	problems, err := checkPages(root)
	require.NoError(t, err)
	assert.Equal(t, []string{
		"README.md:1: link to docs/gone.md: no such file",
		"README.md:1: link to docs/tuning.md#no-such-heading: no heading makes #no-such-heading",
		"docs/tuning.md:11: a sh block needs `<!-- run by: TestName -->` or `<!-- not run: why -->` on the line before",
		"docs/tuning.md:21: run by TestNoSuchTest: no such test in the repository",
	}, problems)
}

// Guards the committed docs: every link and anchor resolves and every
// command block is marked, as `make docs-check` requires.
func TestCommittedDocsPassTheCheck(t *testing.T) {
	problems, err := checkPages("../../..")
	require.NoError(t, err)
	assert.Empty(t, problems)
}

// Guards a WARN or ERROR added to the code without a cause and fix in
// docs/troubleshooting.md: the docs check names it, and names an entry
// whose message the code no longer logs.
func TestTroubleshootingFailsAnUnlistedMessage(t *testing.T) {
	root := t.TempDir()
	for _, d := range messageDirs {
		require.NoError(t, os.MkdirAll(filepath.Join(root, d), 0o755))
	}
	dir := filepath.Join(root, "plugins", "input")
	require.NoError(t, os.WriteFile(filepath.Join(dir, "x.go"), []byte(`package input

func f(log logger) {
	log.Warnf("A brand new warning about shard %s", "x")
	log.Errorf("Committing checkpoint %s failed; retrying next period: %v", "a", nil)
	log.Debugf("not a warning")
	_ = fmt.Errorf("an error returned, not logged")
}
`), 0o644))
	msgs, err := scanMessages(root)
	require.NoError(t, err)
	assert.Len(t, msgs, 2)
	_, problems := matchTroubles(msgs)
	assert.Contains(t, problems, `plugins/input/x.go WARN "A brand new warning about shard %s" has no entry in internal/cmd/docgen/troubleshooting.go`)
	assert.Contains(t, problems, `troubleshooting entry "Heartbeat failed" matches no message the code logs`)
	assert.NotContains(t, strings.Join(problems, "\n"), "Committing checkpoint", "a listed message pairs with its entry")
}

// Guards the committed page: every message the code logs has its entry,
// and docs/troubleshooting.md is what docgen writes.
func TestTroubleshootingCoversTheCode(t *testing.T) {
	root, err := repoRoot()
	require.NoError(t, err)
	msgs, err := scanMessages(root)
	require.NoError(t, err)
	page, problems := troubleshootingPage(msgs)
	assert.Empty(t, problems)
	have, err := os.ReadFile(filepath.Join(root, "docs", "troubleshooting.md"))
	require.NoError(t, err)
	assert.Equal(t, string(page)+"\n", string(have), "run `make docs`")
}

// Guards guides that grow past what a reader can use (checkpointer.md held
// about 11,000 words): the word check names every hand-written page under
// docs/ over the limit, and leaves the data and generated pages alone.
func TestDocsWordCheckFailsALongPage(t *testing.T) {
	root := t.TempDir()
	write := func(p string, words int) {
		require.NoError(t, os.MkdirAll(filepath.Dir(filepath.Join(root, p)), 0o755))
		require.NoError(t, os.WriteFile(filepath.Join(root, p), []byte("# Title\n\n"+strings.Repeat("word ", words-2)+"\n"), 0o644))
	}
	write("README.md", maxPageWords+100)
	write("docs/long.md", maxPageWords+1)
	write("docs/exact.md", maxPageWords)
	write("docs/sub/deep.md", maxPageWords+7)
	write("docs/data/evidence.md", 3*maxPageWords)
	write("docs/components/inputs/kinesis.md", 3*maxPageWords)
	write("docs/troubleshooting.md", 3*maxPageWords)
	long, err := longPages(root)
	require.NoError(t, err)
	assert.Equal(t, []string{
		"docs/long.md: 4001 words (the most is 4000: move measured detail to docs/data/)",
		"docs/sub/deep.md: 4007 words (the most is 4000: move measured detail to docs/data/)",
	}, long)
}

// Guards docs that grow past what a reader can take in as a whole (issue 62:
// 37,400 words against a budget of 35,000): the total check counts README.md
// and every page under docs/ except docs/data/, generated pages included, and
// names the total and the five longest pages.
func TestDocsWordCheckFailsATooLargeTotal(t *testing.T) {
	root := t.TempDir()
	write := func(p string, words int) {
		require.NoError(t, os.MkdirAll(filepath.Dir(filepath.Join(root, p)), 0o755))
		require.NoError(t, os.WriteFile(filepath.Join(root, p), []byte("# Title\n\n"+strings.Repeat("word ", words-2)+"\n"), 0o644))
	}
	write("README.md", 5000)
	write("docs/a.md", 3000)
	write("docs/b.md", 3900)
	write("docs/c.md", 100)
	write("docs/sub/d.md", 3500)
	write("docs/components/inputs/kinesis.md", 9000)
	write("docs/troubleshooting.md", 10000)
	write("docs/notes.txt", 50000)
	write("docs/data/evidence.md", 50000)

	require.NoError(t, checkTotalWords(root, 34500), "a total at the limit passes")

	write("docs/c.md", 601)
	err := checkTotalWords(root, 35000)
	require.Error(t, err)
	assert.Equal(t, "README.md and docs/ (without docs/data/) hold 35001 words; the most is 35000. Longest pages:\n"+
		"  docs/troubleshooting.md: 10000\n"+
		"  docs/components/inputs/kinesis.md: 9000\n"+
		"  README.md: 5000\n"+
		"  docs/b.md: 3900\n"+
		"  docs/sub/d.md: 3500", err.Error())
}

// Guards rows that quote the same words for two messages with different
// causes (with 8-word quotes, "Kinesis did not find the shard though it is
// still listed" starts two messages): the quote grows until it tells them
// apart, while messages of one entry still share their short quote.
func TestTroubleshootingQuotesTellMessagesApart(t *testing.T) {
	msgs := []logMessage{
		{Level: "WARN", Text: "Kinesis did not find the shard though it is still listed, and the stream was recreated"},
		{Level: "WARN", Text: "Kinesis did not find the shard though it is still listed; trying again in %v"},
		{Level: "WARN", Text: "Could not commit the final checkpoint %s of shard %s at the stop: %v"},
		{Level: "WARN", Text: "Could not commit the final checkpoint %s of shard %s at the hand-off: %v"},
	}
	byMsg := map[int]int{0: 0, 1: 1, 2: 2, 3: 2}
	assert.Equal(t, "Kinesis did not find the shard though it is still listed, …", quote(msgs, byMsg, 0))
	assert.Equal(t, "Kinesis did not find the shard though it is still listed; …", quote(msgs, byMsg, 1))
	assert.Equal(t, "Could not commit the final checkpoint %s of …", quote(msgs, byMsg, 2))
	assert.Equal(t, quote(msgs, byMsg, 2), quote(msgs, byMsg, 3))
}
