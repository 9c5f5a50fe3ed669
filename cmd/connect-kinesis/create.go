package main

import (
	"fmt"
	"strings"

	"github.com/redpanda-data/benthos/v4/public/service"
)

// createFormHint returns an error for `create input/output`, a form Benthos'
// create reads as an input and processors ("unrecognised processor type
// 'stdout'"), naming the form that works: input/processors/output, with the
// processors left empty (kinesis//stdout). Other arguments are Benthos'.
func createFormHint(env *service.Environment, args []string) error {
	if len(args) < 2 || args[0] != "create" {
		return nil
	}
	var expr string
	for _, a := range args[1:] {
		if !strings.HasPrefix(a, "-") {
			expr = a
			break
		}
	}
	parts := strings.Split(expr, "/")
	if len(parts) != 2 || parts[1] == "" {
		return nil
	}
	names := strings.Split(parts[1], ",")
	processor, output := false, true
	env.WalkProcessors(func(name string, _ *service.ConfigView) {
		if name == names[0] {
			processor = true
		}
	})
	for _, n := range names {
		found := false
		env.WalkOutputs(func(name string, _ *service.ConfigView) { found = found || name == n })
		output = output && found
	}
	if processor || !output {
		return nil
	}
	return fmt.Errorf("create %s: the form is input/processors/output, so %q was read as a processor; for an input and an output without processors write %s//%s", expr, parts[1], parts[0], parts[1])
}
