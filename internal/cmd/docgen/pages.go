package main

import (
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"unicode"
)

// The hand-written pages the docs check reads: every Markdown file under
// docs/ (generated and data pages included, so links into them resolve and
// links out of them are checked) and the top-level README.md and
// CHANGELOG.md.
func pagePaths(root string) ([]string, error) {
	paths := []string{filepath.Join(root, "README.md"), filepath.Join(root, "CHANGELOG.md")}
	err := filepath.WalkDir(filepath.Join(root, "docs"), func(p string, d os.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if !d.IsDir() && strings.HasSuffix(p, ".md") {
			paths = append(paths, p)
		}
		return nil
	})
	return paths, err
}

var (
	fenceRe    = regexp.MustCompile("^\\s*(```+|~~~+)\\s*([A-Za-z0-9_-]*)")
	linkRe     = regexp.MustCompile(`\]\(([^)\s]+)(?:\s+"[^"]*")?\)`)
	inlineCode = regexp.MustCompile("`[^`]*`")
	htmlAnchor = regexp.MustCompile(`<a\s+(?:id|name)="([^"]+)"`)
	// markerRe is the comment that says what a shell or YAML block is to
	// the checks: `<!-- not run: why -->`, `<!-- run by: TestName -->`,
	// `<!-- not linted: why -->`.
	markerRe = regexp.MustCompile(`^<!--\s*(not run|run by|not linted):\s*(.+?)\s*-->$`)
)

// page is one Markdown file as the checks see it.
type page struct {
	path    string
	lines   []string
	anchors map[string]bool
}

// slug is the anchor GitHub gives a heading: lower case, punctuation other
// than `-` and `_` dropped, spaces turned into `-`.
func slug(heading string) string {
	heading = strings.ToLower(strings.TrimSpace(heading))
	heading = regexp.MustCompile(`\[([^\]]*)\]\([^)]*\)`).ReplaceAllString(heading, "$1")
	var b strings.Builder
	for _, r := range heading {
		switch {
		case r == ' ':
			b.WriteRune('-')
		case r == '-' || r == '_' || unicode.IsLetter(r) || unicode.IsDigit(r):
			b.WriteRune(r)
		}
	}
	return b.String()
}

func readPage(path string) (*page, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	p := &page{path: path, lines: strings.Split(string(b), "\n"), anchors: map[string]bool{}}
	seen := map[string]int{}
	inFence := false
	for _, l := range p.lines {
		if fenceRe.MatchString(l) {
			inFence = !inFence
			continue
		}
		if inFence {
			continue
		}
		for _, m := range htmlAnchor.FindAllStringSubmatch(l, -1) {
			p.anchors[m[1]] = true
		}
		if h, ok := strings.CutPrefix(l, "#"); ok {
			s := slug(strings.TrimLeft(h, "#"))
			if n := seen[s]; n > 0 {
				p.anchors[fmt.Sprintf("%s-%d", s, n)] = true
			} else {
				p.anchors[s] = true
			}
			seen[s]++
		}
	}
	return p, nil
}

// checkPages returns every problem the docs check finds in the pages
// under root: a relative link to a file that does not exist, an #anchor
// that no heading of its page makes, and a shell or YAML block without the
// marker that says whether it is run or linted (see checkBlocks).
func checkPages(root string) ([]string, error) {
	paths, err := pagePaths(root)
	if err != nil {
		return nil, err
	}
	pages := map[string]*page{}
	for _, p := range paths {
		if pages[p], err = readPage(p); err != nil {
			return nil, err
		}
	}
	tests, err := testNames(root)
	if err != nil {
		return nil, err
	}
	var problems []string
	for _, path := range slices.Sorted(func(yield func(string) bool) {
		for p := range pages {
			if !yield(p) {
				return
			}
		}
	}) {
		p := pages[path]
		rel, _ := filepath.Rel(root, path)
		problems = append(problems, checkLinks(root, rel, p, pages)...)
		problems = append(problems, checkBlocks(rel, p, tests)...)
	}
	return problems, nil
}

func checkLinks(root, rel string, p *page, pages map[string]*page) []string {
	var problems []string
	inFence := false
	for i, l := range p.lines {
		if fenceRe.MatchString(l) {
			inFence = !inFence
			continue
		}
		if inFence {
			continue
		}
		for _, m := range linkRe.FindAllStringSubmatch(inlineCode.ReplaceAllString(l, ""), -1) {
			target := m[1]
			if strings.Contains(target, "://") || strings.HasPrefix(target, "mailto:") {
				continue
			}
			file, anchor, _ := strings.Cut(target, "#")
			dest := p.path
			if file != "" {
				dest = filepath.Join(filepath.Dir(p.path), file)
				if _, err := os.Stat(dest); err != nil {
					problems = append(problems, fmt.Sprintf("%s:%d: link to %s: no such file", rel, i+1, target))
					continue
				}
			}
			if anchor == "" {
				continue
			}
			to, ok := pages[dest]
			if !ok {
				problems = append(problems, fmt.Sprintf("%s:%d: link to %s: an anchor into a file the check does not read", rel, i+1, target))
				continue
			}
			if !to.anchors[anchor] {
				problems = append(problems, fmt.Sprintf("%s:%d: link to %s: no heading makes #%s", rel, i+1, target, anchor))
			}
		}
	}
	return problems
}

// commandRe matches the first line of an unlabelled block that shows
// commands rather than output.
var commandRe = regexp.MustCompile(`^\$?\s*(make|connect-kinesis|bin/connect-kinesis|go|redis-cli|kubectl|podman|docker|curl|aws|git|promtool)\s`)

// shellLangs are the fences whose blocks show commands to run.
var shellLangs = []string{"sh", "bash", "shell", "console"}

// checkBlocks requires, on the line before every shell block of a guide
// (docs/data and the generated pages aside), `<!-- run by: TestName -->`
// naming a test of the repository that runs those commands, or `<!-- not
// run: why -->`; and before every YAML block either nothing (it is a whole
// config, which TestDocsYAMLSnippetsLint lints in the binary) or `<!-- not
// linted: why -->` (a fragment, or a config for another build or tool).
func checkBlocks(rel string, p *page, tests map[string]bool) []string {
	if strings.HasPrefix(rel, filepath.Join("docs", "data")) || strings.HasPrefix(rel, filepath.Join("docs", "components")) {
		return nil
	}
	var problems []string
	inFence := false
	for i, l := range p.lines {
		m := fenceRe.FindStringSubmatch(l)
		if m == nil {
			continue
		}
		inFence = !inFence
		if !inFence {
			continue
		}
		marker := markerBefore(p.lines, i)
		lang := m[2]
		if lang == "" && i+1 < len(p.lines) && commandRe.MatchString(p.lines[i+1]) {
			lang = "command"
		}
		switch {
		case lang == "command" || slices.Contains(shellLangs, lang):
			switch {
			case marker == nil || marker[1] == "not linted":
				problems = append(problems, fmt.Sprintf("%s:%d: a %s block needs `<!-- run by: TestName -->` or `<!-- not run: why -->` on the line before", rel, i+1, lang))
			case marker[1] == "run by":
				for _, name := range strings.Fields(strings.ReplaceAll(marker[2], ",", " ")) {
					if !tests[name] {
						problems = append(problems, fmt.Sprintf("%s:%d: run by %s: no such test in the repository", rel, i+1, name))
					}
				}
			}
		case lang == "yaml" || lang == "yml":
			if marker != nil && marker[1] != "not linted" {
				problems = append(problems, fmt.Sprintf("%s:%d: a YAML block is linted or `<!-- not linted: why -->`", rel, i+1))
			}
		}
	}
	return problems
}

// markerBefore is the marker comment on the line before line i (blank lines
// between allowed), or nil.
func markerBefore(lines []string, i int) []string {
	for j := i - 1; j >= 0; j-- {
		if strings.TrimSpace(lines[j]) == "" {
			continue
		}
		return markerRe.FindStringSubmatch(strings.TrimSpace(lines[j]))
	}
	return nil
}

// testNames lists every `func TestX(` of the repository's _test.go files.
func testNames(root string) (map[string]bool, error) {
	names := map[string]bool{}
	re := regexp.MustCompile(`(?m)^func (Test\w+)\(`)
	err := filepath.WalkDir(root, func(p string, d os.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() && (strings.HasPrefix(d.Name(), ".") && p != root || d.Name() == "bin" || d.Name() == "dist") {
			return filepath.SkipDir
		}
		if strings.HasSuffix(p, "_test.go") {
			b, err := os.ReadFile(p)
			if err != nil {
				return err
			}
			for _, m := range re.FindAllStringSubmatch(string(b), -1) {
				names[m[1]] = true
			}
		}
		return nil
	})
	return names, err
}

// maxPageWords is the most words (as `wc -w` counts them) a hand-written
// guide under docs/ may hold: past it a reader no longer finds the rule
// they came for, and measured detail belongs in docs/data/.
const maxPageWords = 4000

// longPages names every hand-written page under root's docs/ over
// maxPageWords, with its count. The data pages (docs/data/) and the pages
// docgen writes (docs/components/, docs/troubleshooting.md) are left out:
// the first hold figures by design and the second are sized by the specs
// and the code.
func longPages(root string) ([]string, error) {
	docs := filepath.Join(root, "docs")
	skip := []string{filepath.Join(docs, "data"), filepath.Join(docs, "components")}
	var long []string
	err := filepath.WalkDir(docs, func(p string, d os.DirEntry, err error) error {
		switch {
		case err != nil:
			return err
		case d.IsDir() && slices.Contains(skip, p):
			return filepath.SkipDir
		case d.IsDir() || !strings.HasSuffix(p, ".md") || p == filepath.Join(docs, "troubleshooting.md"):
			return nil
		}
		b, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		if n := len(strings.Fields(string(b))); n > maxPageWords {
			rel, _ := filepath.Rel(root, p)
			long = append(long, fmt.Sprintf("%s: %d words (the most is %d: move measured detail to docs/data/)", filepath.ToSlash(rel), n, maxPageWords))
		}
		return nil
	})
	return long, err
}

// maxTotalWords is the most words README.md and the pages under docs/
// (without docs/data/) may hold together, generated pages included: the docs
// a user reads, about a long evening's reading. Measured detail goes to
// docs/data/, which is left out.
const maxTotalWords = 35000

// checkTotalWords fails when README.md and docs/**/*.md under root, without
// docs/data/, hold over max words together, naming the total and the five
// longest pages so the writer knows where to cut.
func checkTotalWords(root string, max int) error {
	type page struct {
		path  string
		words int
	}
	var pages []page
	count := func(p string) error {
		b, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(root, p)
		pages = append(pages, page{filepath.ToSlash(rel), len(strings.Fields(string(b)))})
		return nil
	}
	if err := count(filepath.Join(root, "README.md")); err != nil {
		return fmt.Errorf("counting the docs' words: %w", err)
	}
	docs := filepath.Join(root, "docs")
	err := filepath.WalkDir(docs, func(p string, d os.DirEntry, err error) error {
		switch {
		case err != nil:
			return err
		case d.IsDir() && p == filepath.Join(docs, "data"):
			return filepath.SkipDir
		case d.IsDir() || !strings.HasSuffix(p, ".md"):
			return nil
		}
		return count(p)
	})
	if err != nil {
		return fmt.Errorf("counting the docs' words: %w", err)
	}
	total := 0
	for _, p := range pages {
		total += p.words
	}
	if total <= max {
		return nil
	}
	slices.SortStableFunc(pages, func(a, b page) int { return b.words - a.words })
	var longest []string
	for _, p := range pages[:min(5, len(pages))] {
		longest = append(longest, fmt.Sprintf("%s: %d", p.path, p.words))
	}
	return fmt.Errorf("README.md and docs/ (without docs/data/) hold %d words; the most is %d. Longest pages:\n  %s",
		total, max, strings.Join(longest, "\n  "))
}
