// Command connect-kinesis is Benthos with the connect-kinesis plugins: the
// `kinesis` input and output, the Redis checkpointer's operator commands and a
// Prometheus metrics exporter, next to Benthos' own pure and io components.
//
// A binary of your own gets the same plugins with the same blank imports.
package main

import (
	"context"
	"fmt"
	"os"

	"github.com/KimMachineGun/automemlimit/memlimit"
	"github.com/redpanda-data/benthos/v4/public/service"

	// Benthos core components: generate, bloblang, stdin/stdout, file, http...
	_ "github.com/redpanda-data/benthos/v4/public/components/io"
	_ "github.com/redpanda-data/benthos/v4/public/components/pure"

	"github.com/connect-kinesis/connect-kinesis/internal/ops"
	"github.com/connect-kinesis/connect-kinesis/plugins/input"
	_ "github.com/connect-kinesis/connect-kinesis/plugins/output"
	"github.com/connect-kinesis/connect-kinesis/plugins/prometheus"
)

func main() {
	b := buildInfo()
	if wantsVersion(os.Args[1:]) {
		fmt.Print(b)
		return
	}
	setAppHelp()
	// Before any pipeline allocates: the limit is said once the logger exists.
	memLimit := setMemoryLimit(memlimit.FromCgroup)
	// This binary has no other Prometheus exporter: serve ours as
	// `prometheus` too, the name Benthos configs usually use.
	if _, err := prometheus.RegisterAsPrometheus(service.GlobalEnvironment()); err != nil {
		fmt.Fprintln(os.Stderr, "registering the prometheus exporter:", err)
		os.Exit(1)
	}
	if err := createFormHint(service.GlobalEnvironment(), os.Args[1:]); err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	// Lint's checks that a field's lint rule cannot express; Benthos' lint
	// runs after them, and either failing fails the command.
	// Benthos' lint gives every lint rule's finding column 1: its output
	// is rewritten to point at the field.
	extraLints, restoreStderr := false, func() {}
	if configs, resources, ok := lintArgs(os.Args[1:]); ok {
		extraLints = lintExtra(os.Stderr, configs, resources)
		if restore, err := fixLintColumns(); err == nil {
			restoreStderr = restore
		}
	}
	code, err := service.RunCLIToCode(context.Background(),
		service.CLIOptSetBinaryName("connect-kinesis"),
		service.CLIOptSetProductName("connect-kinesis"),
		service.CLIOptSetVersion(b.Version, b.Date),
		service.CLIOptAddCommand(ops.CheckpointsCommand()),
		service.CLIOptAddCommand(ops.ConsumersCommand()),
		service.CLIOptOnLoggerInit(memLimit.log),
	)
	restoreStderr()
	if err != nil {
		fmt.Fprintln(os.Stderr, err.Error())
	}
	// An input that found its lease.instance_id held by another running
	// process ended the pipeline: a failure (logged at ERROR), not a
	// stream that finished, so a supervisor sees it.
	if code == 0 && input.Refused() != nil {
		code = 1
	}
	if code == 0 && extraLints {
		code = 1
	}
	if code != 0 {
		os.Exit(code)
	}
}
