package main

import (
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// lintFile runs `connect-kinesis lint` on conf and returns its output and
// whether it passed.
func lintFile(t *testing.T, conf string) (string, bool) {
	t.Helper()
	path := filepath.Join(t.TempDir(), "config.yaml")
	require.NoError(t, os.WriteFile(path, []byte(conf), 0o600))
	out, err := exec.CommandContext(t.Context(), binary, "lint", path).CombinedOutput()
	return string(out), err == nil
}

// lineOf is the 1-based line of conf whose text starts (after indentation)
// with prefix.
func lineOf(t *testing.T, conf, prefix string) int {
	t.Helper()
	for i, l := range strings.Split(conf, "\n") {
		if strings.HasPrefix(strings.TrimSpace(l), prefix) {
			return i + 1
		}
	}
	t.Fatalf("no line starts with %q in:\n%s", prefix, conf)
	return 0
}

// A config from `create` leaves the input's required fields for the user to
// fill, and lint refuses it until they are, naming each field at its line
// (issue 39 item 8: create wrote `url: redis://localhost:6379` and `group:
// orders-to-s3`, the README's example group, and lint passed it, so two
// pipelines left on it shared a group and split each other's shards).
func TestCreatedConfigFailsLintUntilFilled(t *testing.T) {
	t.Parallel()
	conf := run(t, "create", "kinesis//drop")
	assert.NotContains(t, conf, "orders-to-s3", "no example group is written for the user")
	assert.NotContains(t, conf, "redis://localhost:6379", "no example Redis is written for the user")

	out, ok := lintFile(t, conf)
	require.False(t, ok, "lint refuses a config with its required fields unfilled:\n%s", out)
	for field, want := range map[string]string{
		"streams:": "field streams: write a list of at least one stream name or ARN, e.g. [ orders ]",
		"url:":     "field checkpoint.redis.url: required",
		"group:":   "field checkpoint.group: required",
	} {
		line := lineOf(t, conf, field)
		assert.Regexp(t, regexp.MustCompile(`\(`+strconv.Itoa(line)+`,\d+\) `+regexp.QuoteMeta(want)), out, "lint names %s at line %d", field, line)
	}

	filled := strings.NewReplacer(
		"streams: []", "streams: [ orders ]",
		`url: ""`, "url: redis://redis.internal:6379",
		`group: ""`, "group: billing",
	).Replace(conf)
	out, ok = lintFile(t, filled)
	assert.True(t, ok, "a filled config lints clean:\n%s", out)
}

// `create kinesis/stdout` (an input and an output, without the empty
// processors slot) says the form that works.
func TestCreateWithOneSlashNamesTheForm(t *testing.T) {
	t.Parallel()
	out, err := exec.CommandContext(t.Context(), binary, "create", "kinesis/stdout").CombinedOutput()
	require.Error(t, err)
	assert.Contains(t, string(out), "kinesis//stdout", "the error names the form input/processors/output:\n%s", out)
}

// A config from `create` with the kinesis output names no stream: it wrote
// `stream: my-stream`, the field's example, so a pipeline left on it wrote
// to a stream of that name. Lint refuses it empty, at its line.
func TestCreatedOutputConfigFailsLintUntilItNamesAStream(t *testing.T) {
	t.Parallel()
	conf := run(t, "create", "generate//kinesis")
	assert.NotContains(t, conf, "my-stream", "no example stream is written for the user")
	out, ok := lintFile(t, conf)
	require.False(t, ok, "lint refuses a config with no stream:\n%s", out)
	line := lineOf(t, conf, "stream:")
	assert.Regexp(t, regexp.MustCompile(`\(`+strconv.Itoa(line)+`,\d+\) `+regexp.QuoteMeta("field stream: required")), out)

	out, ok = lintFile(t, strings.Replace(conf, `stream: ""`, "stream: orders", 1))
	assert.True(t, ok, "a config naming its stream lints clean:\n%s", out)
}

// Guards issue 60 item 7: `create kinesis/mapping/stdout` left `mapping: ""`
// for the user to fill, lint named only the input's three fields, passed the
// config once they were filled, and the run failed on the empty mapping.
func TestCreatedConfigLintNamesEveryPlaceholder(t *testing.T) {
	t.Parallel()
	conf := run(t, "create", "kinesis/mapping/stdout")
	filled := strings.NewReplacer(
		"streams: []", "streams: [ orders ]",
		`url: ""`, "url: redis://redis.internal:6379",
		`group: ""`, "group: billing",
	).Replace(conf)
	out, ok := lintFile(t, filled)
	require.False(t, ok, "lint refuses the mapping create left empty:\n%s", out)
	line := lineOf(t, filled, "- mapping:")
	assert.Regexp(t, regexp.MustCompile(`\(`+strconv.Itoa(line)+`,7\) `+regexp.QuoteMeta("field mapping: required, and `create` left it empty")), out)

	out, ok = lintFile(t, strings.Replace(filled, `- mapping: ""`, `- mapping: root = this`, 1))
	assert.True(t, ok, "a filled mapping lints clean:\n%s", out)
}

// deadLetterConf is a pipeline whose input sends records it gives up on to
// the output resource labelled label, with one output resource, "dlq".
const deadLetterConf = `input:
  kinesis:
    streams: [ orders ]
    checkpoint:
      redis:
        url: redis://redis.internal:6379
      group: billing
    redelivery:
      max_attempts: 3
      dead_letter: %s
output:
  drop: {}
output_resources:
  - label: dlq
    drop: {}
`

// Guards issue 60 item 8: a misspelled redelivery.dead_letter passed lint
// although the file defines its output resources, and at run the input
// retried the record every second forever.
func TestLintRefusesADeadLetterNoOutputResourceHas(t *testing.T) {
	t.Parallel()
	conf := strings.Replace(deadLetterConf, "%s", "dlg", 1)
	out, ok := lintFile(t, conf)
	require.False(t, ok, "lint refuses a dead letter the file does not define:\n%s", out)
	line := lineOf(t, conf, "dead_letter:")
	assert.Regexp(t, regexp.MustCompile(`\(`+strconv.Itoa(line)+`,7\) `+regexp.QuoteMeta(`field redelivery.dead_letter: no output resource is labelled "dlg"; this file's output_resources are labelled: dlq`)), out)

	out, ok = lintFile(t, strings.Replace(deadLetterConf, "%s", "dlq", 1))
	assert.True(t, ok, "a dead letter the file defines lints clean:\n%s", out)
}

// Guards issue 60 item 11: `start_position: oldest` was refused with "value
// oldest is not a valid option for this field", without the valid values.
func TestLintNamesTheValidStartPositions(t *testing.T) {
	t.Parallel()
	conf := "input:\n  kinesis:\n    streams: [ orders ]\n    start_position: oldest\n    checkpoint:\n      redis:\n        url: redis://redis.internal:6379\n      group: billing\noutput:\n  drop: {}\n"
	out, ok := lintFile(t, conf)
	require.False(t, ok, "%s", out)
	assert.Contains(t, out, "(4,5) field start_position: oldest is not one of trim_horizon, latest, at_timestamp", "lint lists the valid values at the field:\n%s", out)
}
