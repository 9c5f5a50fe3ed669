package main

import (
	"bufio"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"regexp"
	"sort"
	"strings"

	"gopkg.in/yaml.v3"
)

// createPlaceholder is the comment Benthos' `create` writes beside a
// required field it leaves empty.
const createPlaceholder = "No default (required)"

// lintArgs returns the files `connect-kinesis lint` reads, when args are a
// lint command: the config given with -c, the paths after `lint` (globs
// expanded) and the resources given with -r. Markdown files and directories
// are Benthos' alone.
func lintArgs(args []string) (configs, resources []string, ok bool) {
	var paths []string
	for i := 0; i < len(args); i++ {
		a := args[i]
		if !ok {
			switch {
			case a == "lint":
				ok = true
			case a == "-c" || a == "--config" || a == "-config":
				if i+1 < len(args) {
					configs = append(configs, args[i+1])
					i++
				}
			case a == "-r" || a == "--resources" || a == "-resources":
				if i+1 < len(args) {
					resources = append(resources, args[i+1])
					i++
				}
			case strings.HasPrefix(a, "--config=") || strings.HasPrefix(a, "-c="):
				configs = append(configs, a[strings.Index(a, "=")+1:])
			case strings.HasPrefix(a, "--resources=") || strings.HasPrefix(a, "-r="):
				resources = append(resources, a[strings.Index(a, "=")+1:])
			case !strings.HasPrefix(a, "-"):
				return nil, nil, false
			}
			continue
		}
		if !strings.HasPrefix(a, "-") {
			paths = append(paths, a)
		}
	}
	if !ok {
		return nil, nil, false
	}
	expand := func(in []string) (out []string) {
		for _, p := range in {
			matches, err := filepath.Glob(p)
			if err != nil || len(matches) == 0 {
				matches = []string{p}
			}
			for _, m := range matches {
				if ext := filepath.Ext(m); ext == ".yaml" || ext == ".yml" {
					out = append(out, m)
				}
			}
		}
		return out
	}
	return append(expand(paths), expand(configs)...), expand(resources), true
}

// lintExtra runs the checks Benthos' lint cannot express as a field's lint
// rule, over the files of a lint command, and writes each finding to w in
// Benthos' form, path(line,column) message. It returns whether it found any.
// A file it cannot read or parse is left to Benthos' lint, which reports it.
//
// The checks:
//   - a field `create` left empty for the user to fill (its placeholder
//     comment still beside it, its value still empty): Benthos accepts an
//     empty string for a required field, so a `mapping: ""` passed lint and
//     failed at start. The kinesis plugins name their own required fields.
//   - a kinesis input's redelivery.dead_letter that no output resource of the
//     files linted together is labelled with: a plugin's lint rule sees only
//     its own block. When those files define no output resources at all, the
//     resources may come from a file given to the run alone, so nothing is
//     said.
func lintExtra(w io.Writer, configs, resources []string) bool {
	docs := map[string]*yaml.Node{}
	var labels []string
	for _, p := range append(append([]string{}, configs...), resources...) {
		if _, seen := docs[p]; seen {
			continue
		}
		raw, err := os.ReadFile(p)
		if err != nil {
			continue
		}
		var doc yaml.Node
		if err := yaml.Unmarshal(raw, &doc); err != nil || len(doc.Content) == 0 {
			continue
		}
		docs[p] = doc.Content[0]
		if res := mapValue(doc.Content[0], "output_resources"); res != nil && res.Kind == yaml.SequenceNode {
			for _, r := range res.Content {
				if l := mapValue(r, "label"); l != nil && l.Kind == yaml.ScalarNode && l.Value != "" {
					labels = append(labels, l.Value)
				}
			}
		}
	}
	sort.Strings(labels)
	found := false
	report := func(path string, n *yaml.Node, format string, a ...any) {
		found = true
		fmt.Fprintf(w, "%s(%d,%d) %s\n", path, n.Line, n.Column, fmt.Sprintf(format, a...))
	}
	for _, p := range configs {
		root, ok := docs[p]
		if !ok {
			continue
		}
		walkMap(root, false, func(key, value *yaml.Node, inKinesis bool) {
			if !inKinesis && strings.Contains(key.LineComment+value.LineComment, createPlaceholder) && emptyNode(value) {
				report(p, key, "field %s: required, and `create` left it empty; fill it in", key.Value)
			}
			if key.Value != "kinesis" || value.Kind != yaml.MappingNode || len(labels) == 0 {
				return
			}
			dl := mapValue(mapValue(value, "redelivery"), "dead_letter")
			if dl == nil || dl.Kind != yaml.ScalarNode || dl.Value == "" || strings.Contains(dl.Value, "${") {
				return
			}
			if i := sort.SearchStrings(labels, dl.Value); i < len(labels) && labels[i] == dl.Value {
				return
			}
			report(p, keyOf(mapValue(value, "redelivery"), "dead_letter"), "field redelivery.dead_letter: no output resource is labelled %q; this file's output_resources are labelled: %s", dl.Value, strings.Join(labels, ", "))
		})
	}
	return found
}

// walkMap calls fn for every key and value of every mapping under n, saying
// whether the pair is inside a kinesis component.
func walkMap(n *yaml.Node, inKinesis bool, fn func(key, value *yaml.Node, inKinesis bool)) {
	switch n.Kind {
	case yaml.MappingNode:
		for i := 0; i+1 < len(n.Content); i += 2 {
			k, v := n.Content[i], n.Content[i+1]
			fn(k, v, inKinesis)
			walkMap(v, inKinesis || k.Value == "kinesis", fn)
		}
	case yaml.SequenceNode:
		for _, c := range n.Content {
			walkMap(c, inKinesis, fn)
		}
	}
}

// mapValue is the value of key in the mapping n, or nil.
func mapValue(n *yaml.Node, key string) *yaml.Node {
	if k := keyOf(n, key); k != nil {
		for i := 0; i+1 < len(n.Content); i += 2 {
			if n.Content[i] == k {
				return n.Content[i+1]
			}
		}
	}
	return nil
}

// keyOf is the key node of key in the mapping n, or nil.
func keyOf(n *yaml.Node, key string) *yaml.Node {
	if n == nil || n.Kind != yaml.MappingNode {
		return nil
	}
	for i := 0; i+1 < len(n.Content); i += 2 {
		if n.Content[i].Value == key {
			return n.Content[i]
		}
	}
	return nil
}

// emptyNode says whether n still holds create's empty value: "", [] or {}.
func emptyNode(n *yaml.Node) bool {
	switch n.Kind {
	case yaml.ScalarNode:
		return n.Value == "" && n.Tag != "!!null"
	case yaml.SequenceNode, yaml.MappingNode:
		return len(n.Content) == 0
	}
	return false
}

// lintPosition matches a finding of Benthos' lint at column 1, the column
// it gives every lint rule's message whatever the field's indentation.
var lintPosition = regexp.MustCompile(`^(.+?)\((\d+),1\) `)

// fixLintColumns points Benthos' lint findings at the field's own column
// instead of 1: it replaces os.Stderr, which Benthos' lint writes to, with a
// pipe whose lines it rewrites onto the real stderr. The returned function
// restores os.Stderr and waits for the last line.
func fixLintColumns() (restore func(), err error) {
	real := os.Stderr
	r, w, err := os.Pipe()
	if err != nil {
		return nil, fmt.Errorf("creating the lint output pipe: %w", err)
	}
	os.Stderr = w
	done := make(chan struct{})
	go func() {
		defer close(done)
		files := map[string][]string{}
		sc := bufio.NewScanner(r)
		sc.Buffer(make([]byte, 64*1024), 1024*1024)
		for sc.Scan() {
			fmt.Fprintln(real, withColumn(sc.Text(), files))
		}
	}()
	return func() {
		os.Stderr = real
		_ = w.Close()
		<-done
		_ = r.Close()
	}, nil
}

// withColumn rewrites line's column 1 to the column where its line's field
// starts (after indentation and a list item's dash), reading the file once.
func withColumn(line string, files map[string][]string) string {
	m := lintPosition.FindStringSubmatchIndex(line)
	if m == nil {
		return line
	}
	path, n := line[m[2]:m[3]], 0
	fmt.Sscan(line[m[4]:m[5]], &n)
	lines, ok := files[path]
	if !ok {
		if raw, err := os.ReadFile(path); err == nil {
			lines = strings.Split(string(raw), "\n")
		}
		files[path] = lines
	}
	if n < 1 || n > len(lines) {
		return line
	}
	text := lines[n-1]
	col := len(text) - len(strings.TrimLeft(text, " -")) + 1
	if col <= 1 {
		return line
	}
	return fmt.Sprintf("%s(%d,%d) %s", path, n, col, line[m[1]:])
}
