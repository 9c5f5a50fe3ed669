package main

import (
	"go/ast"
	"go/parser"
	"go/token"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
)

// messageDirs hold the code of the input, the output, the checkpointer and
// the checkpoints CLI: every WARN and ERROR they log is listed in
// docs/troubleshooting.md.
var messageDirs = []string{
	"plugins/input", "plugins/output", "plugins/checkpointer", "plugins/prometheus",
	"internal/consumer", "internal/producer", "internal/streams", "internal/awsconf", "internal/ops",
}

// logMessage is one WARN or ERROR the code logs (or, for the CLI, prints
// as `warning:`): its level and its format, or for a message composed at
// run time the function that composes it.
type logMessage struct {
	Level, Text, Where string
}

// key identifies a message in the troubleshooting table.
func (m logMessage) key() string { return m.Level + " " + m.Text }

// stringValue folds a string literal, or a sum of them, into its value.
func stringValue(e ast.Expr) (string, bool) {
	switch e := e.(type) {
	case *ast.BasicLit:
		if e.Kind != token.STRING {
			return "", false
		}
		s, err := strconv.Unquote(e.Value)
		return s, err == nil
	case *ast.BinaryExpr:
		if e.Op != token.ADD {
			return "", false
		}
		a, ok := stringValue(e.X)
		if !ok {
			return "", false
		}
		b, ok := stringValue(e.Y)
		return a + b, ok
	case *ast.ParenExpr:
		return stringValue(e.X)
	}
	return "", false
}

var logLevels = map[string]string{"Warnf": "WARN", "Warn": "WARN", "Errorf": "ERROR", "Error": "ERROR"}

// scanMessages lists the WARN and ERROR messages of the code under root's
// messageDirs, sorted and without repeats.
func scanMessages(root string) ([]logMessage, error) {
	fs := token.NewFileSet()
	seen := map[string]bool{}
	var msgs []logMessage
	for _, dir := range messageDirs {
		err := filepath.WalkDir(filepath.Join(root, dir), func(p string, d os.DirEntry, err error) error {
			if err != nil || d.IsDir() || !strings.HasSuffix(p, ".go") || strings.HasSuffix(p, "_test.go") {
				return err
			}
			f, err := parser.ParseFile(fs, p, nil, 0)
			if err != nil {
				return err
			}
			rel, _ := filepath.Rel(root, p)
			for _, decl := range f.Decls {
				fn, ok := decl.(*ast.FuncDecl)
				if !ok {
					continue
				}
				ast.Inspect(fn, func(n ast.Node) bool {
					c, ok := n.(*ast.CallExpr)
					if !ok || len(c.Args) == 0 {
						return true
					}
					sel, ok := c.Fun.(*ast.SelectorExpr)
					if !ok {
						return true
					}
					var m logMessage
					if id, ok := sel.X.(*ast.Ident); ok && (id.Name == "fmt" || id.Name == "errors") {
						// The CLI's warnings: fmt.Fprintf(w, "warning: ...").
						if id.Name != "fmt" || sel.Sel.Name != "Fprintf" || len(c.Args) < 2 {
							return true
						}
						s, ok := stringValue(c.Args[1])
						if !ok || !strings.HasPrefix(s, "warning: ") {
							return true
						}
						m = logMessage{Level: "WARN", Text: strings.TrimSuffix(strings.TrimPrefix(s, "warning: "), "\n")}
					} else {
						level := logLevels[sel.Sel.Name]
						if level == "" {
							return true
						}
						s, ok := stringValue(c.Args[0])
						if !ok {
							// Composed at run time: named by where.
							s = "(composed in " + fn.Name.Name + ")"
						}
						m = logMessage{Level: level, Text: s}
					}
					m.Where = rel
					if !seen[m.key()] {
						seen[m.key()] = true
						msgs = append(msgs, m)
					}
					return true
				})
			}
			return nil
		})
		if err != nil {
			return nil, err
		}
	}
	slices.SortFunc(msgs, func(a, b logMessage) int { return strings.Compare(a.Where+a.key(), b.Where+b.key()) })
	return msgs, nil
}
