// Command testreport reads `go test -json` on stdin and prints what go test
// prints without -json (a line per package, the output of failing tests,
// build errors), then the ten slowest tests and a closing line
// "N passed, N failed[, N skipped]". It exits 1 when a test or a package
// failed, so a pipeline under `set -o pipefail` fails either way.
//
//	go test -json ./... 2>&1 | go run ./internal/cmd/testreport -o bin/test.json
package main

import (
	"flag"
	"fmt"
	"io"
	"os"
)

func main() {
	save := flag.String("o", "", "also write the raw `go test -json` stream to this file")
	slowest := flag.Int("slowest", 10, "how many of the slowest tests to list")
	flag.Parse()

	var in io.Reader = os.Stdin
	if *save != "" {
		f, err := os.Create(*save)
		if err != nil {
			fmt.Fprintln(os.Stderr, "testreport: creating the JSON copy:", err)
			os.Exit(2)
		}
		defer f.Close()
		in = io.TeeReader(os.Stdin, f)
	}
	r := newReport(os.Stdout)
	if err := r.read(in); err != nil {
		fmt.Fprintln(os.Stderr, "testreport:", err)
		os.Exit(2)
	}
	if !r.summary(*slowest) {
		os.Exit(1)
	}
}
