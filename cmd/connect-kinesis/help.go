package main

import (
	"strings"

	"github.com/urfave/cli/v2"
)

// appUsage and appDescription replace the lines Benthos' CLI hard-codes (a
// generic tagline and `create kafka//file`, which fails here: this binary has
// no kafka). Benthos offers no option for them, so they go into the help
// template of urfave/cli, which renders the top-level help.
const (
	appUsage = "Amazon Kinesis Data Streams pipelines: Benthos with a kinesis input, a kinesis output and Redis checkpoints"

	appDescription = `Either run connect-kinesis as a stream processor or choose a command:

  connect-kinesis list inputs outputs
  connect-kinesis create kinesis/mapping/stdout > ./config.yaml
  connect-kinesis create generate//kinesis > ./producer.yaml
  connect-kinesis lint ./config.yaml
  connect-kinesis run ./config.yaml
  connect-kinesis -c ./config.yaml                the same run, with the global option -c
  connect-kinesis checkpoints show --redis-url redis://localhost:6379 --group my-app --stream orders

A generated config needs its required fields filled (streams, checkpoint.redis.url,
checkpoint.group for the input; stream, partition_key for the output).

Global options of a run (hidden from the list below; run --help describes the others):
  -c, --config FILE    the config to run
  -r, --resources GLOB extra resource files; also --set, --log.level, --chilled, -e, -t`
)

// setAppHelp installs the help template with this binary's name and examples.
func setAppHelp() {
	cli.AppHelpTemplate = strings.NewReplacer(
		`{{template "helpNameTemplate" .}}`, `{{.Name}} - `+appUsage,
		`{{template "descriptionTemplate" .}}`, `{{wrap "`+strings.ReplaceAll(appDescription, "\n", `\n`)+`" 3}}`,
	).Replace(cli.AppHelpTemplate)
}
