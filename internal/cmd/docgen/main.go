// Command docgen writes docs/components/<kind>/<name>.md for every plugin of
// this project from its ConfigSpec, or with -check fails when the committed
// pages differ from what the specs say (so `make test` catches stale docs).
// With -check-words it also fails when a hand-written guide under docs/ is
// over maxPageWords words, or when README.md and docs/ (without docs/data/)
// hold over maxTotalWords words together.
//
// It renders ConfigView.TemplateData() with its own template because
// ConfigView.RenderDocs() panics in Benthos v4.60.0.
package main

import (
	"bytes"
	_ "embed"
	"flag"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"text/template"

	"github.com/redpanda-data/benthos/v4/public/service"

	"github.com/connect-kinesis/connect-kinesis/internal/metricsdoc"

	_ "github.com/connect-kinesis/connect-kinesis/plugins/input"
	_ "github.com/connect-kinesis/connect-kinesis/plugins/output"
	_ "github.com/connect-kinesis/connect-kinesis/plugins/prometheus"
)

//go:embed component.md.tmpl
var pageTemplate string

// ours lists the project's plugins by the folder their page goes in.
var ours = map[string][]string{
	"inputs":  {"kinesis"},
	"outputs": {"kinesis"},
	"metrics": {"kinesis_prometheus"},
}

// metricsOf lists the metrics documented on each page.
var metricsOf = map[string][]metricsdoc.Metric{
	"inputs/kinesis":  metricsdoc.Input,
	"outputs/kinesis": metricsdoc.Output,
}

// maxFieldWords is the most words a field's description may hold
// (docs/decisions.md, "Field docs of at most 80 words"): the default's
// meaning and when to change it, then a link to the guide that explains
// more. A longer one fails `make docs` and `make docs-check`.
const maxFieldWords = 80

// longFields names every field of data whose description is over
// maxFieldWords, with its count.
func longFields(kind, name string, data service.TemplateDataPlugin) []string {
	var long []string
	for _, f := range data.Fields {
		if n := len(strings.Fields(f.Description)); n > maxFieldWords {
			long = append(long, fmt.Sprintf("%s %s field %s: %d words", kind, name, f.FullName, n))
		}
	}
	return long
}

func main() {
	out := flag.String("out", "docs/components", "folder to write pages into")
	check := flag.Bool("check", false, "compare with the pages on disk instead of writing; exit 1 when any differs")
	checkWords := flag.Bool("check-words", false, fmt.Sprintf("also fail when a hand-written page under docs/ holds over %d words, or README.md and docs/ over %d together", maxPageWords, maxTotalWords))
	flag.Parse()
	if err := run(*out, *check); err != nil {
		fmt.Fprintln(os.Stderr, "docgen:", err)
		os.Exit(1)
	}
	if !*checkWords {
		return
	}
	if err := checkWordCounts(); err != nil {
		fmt.Fprintln(os.Stderr, "docgen:", err)
		os.Exit(1)
	}
}

// checkWordCounts fails when longPages names any page of the repository, or
// when the docs as a whole are over maxTotalWords.
func checkWordCounts() error {
	root, err := repoRoot()
	if err != nil {
		return err
	}
	long, err := longPages(root)
	if err != nil {
		return fmt.Errorf("counting the docs' words: %w", err)
	}
	if len(long) > 0 {
		return fmt.Errorf("guides over %d words:\n  %s", maxPageWords, strings.Join(long, "\n  "))
	}
	return checkTotalWords(root, maxTotalWords)
}

func run(out string, check bool) error {
	tmpl, err := template.New("page").Funcs(template.FuncMap{
		"trim":   strings.TrimSpace,
		"escape": func(s string) string { return strings.ReplaceAll(s, "|", `\|`) },
		"oneline": func(s string) string {
			return strings.Join(strings.Fields(s), " ")
		},
		"join": strings.Join,
	}).Parse(pageTemplate)
	if err != nil {
		return err
	}
	pages := map[string][]byte{}
	var renderErr error
	var tooLong []string
	render := func(kind string) func(name string, view *service.ConfigView) {
		return func(name string, view *service.ConfigView) {
			if !slices.Contains(ours[kind], name) || renderErr != nil {
				return
			}
			data, err := view.TemplateData()
			if err != nil {
				renderErr = fmt.Errorf("reading the spec of %s %s: %w", kind, name, err)
				return
			}
			tooLong = append(tooLong, longFields(kind, name, data)...)
			var buf bytes.Buffer
			if err := tmpl.Execute(&buf, struct {
				Kind    string
				Metrics []metricsdoc.Metric
				service.TemplateDataPlugin
			}{strings.TrimSuffix(kind, "s"), metricsOf[kind+"/"+name], data}); err != nil {
				renderErr = fmt.Errorf("rendering %s %s: %w", kind, name, err)
				return
			}
			pages[filepath.Join(out, kind, name+".md")] = buf.Bytes()
		}
	}
	env := service.GlobalEnvironment()
	env.WalkInputs(render("inputs"))
	env.WalkOutputs(render("outputs"))
	env.WalkMetrics(render("metrics"))
	if renderErr != nil {
		return renderErr
	}
	if len(tooLong) > 0 {
		return fmt.Errorf("field descriptions over %d words (move the detail to the guide the field links to):\n  %s",
			maxFieldWords, strings.Join(tooLong, "\n  "))
	}
	for kind, names := range ours {
		for _, name := range names {
			if _, ok := pages[filepath.Join(out, kind, name+".md")]; !ok {
				return fmt.Errorf("%s %s is not registered: is its package imported here?", kind, name)
			}
		}
	}
	root, err := repoRoot()
	if err != nil {
		return err
	}
	msgs, err := scanMessages(root)
	if err != nil {
		return fmt.Errorf("reading the code's log messages: %w", err)
	}
	page, problems := troubleshootingPage(msgs)
	if len(problems) > 0 {
		return fmt.Errorf("troubleshooting:\n  %s", strings.Join(problems, "\n  "))
	}
	pages[filepath.Join(filepath.Dir(out), "troubleshooting.md")] = append(page, '\n')
	var stale []string
	for _, p := range slices.Sorted(maps.Keys(pages)) {
		if check {
			have, err := os.ReadFile(p)
			if err != nil || !bytes.Equal(have, pages[p]) {
				stale = append(stale, p)
			}
			continue
		}
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			return err
		}
		if err := os.WriteFile(p, pages[p], 0o644); err != nil {
			return err
		}
	}
	if check {
		problems, err := checkPages(root)
		if err != nil {
			return fmt.Errorf("checking the docs' links and blocks: %w", err)
		}
		if len(problems) > 0 {
			return fmt.Errorf("docs check:\n  %s", strings.Join(problems, "\n  "))
		}
	}
	if len(stale) > 0 {
		return fmt.Errorf("stale generated docs (run `make docs` and commit): %s", strings.Join(stale, ", "))
	}
	return nil
}
