package input

import (
	"fmt"
	"slices"
	"strings"

	"github.com/connect-kinesis/connect-kinesis/internal/awsconf"
	"github.com/connect-kinesis/connect-kinesis/internal/consumer"
	"github.com/connect-kinesis/connect-kinesis/internal/kinesisx"
	"github.com/connect-kinesis/connect-kinesis/internal/lintrule"
	"github.com/connect-kinesis/connect-kinesis/plugins/checkpointer"
)

// rfc3339Layout is time.RFC3339Nano as Bloblang's ts_parse takes it.
const rfc3339Layout = "2006-01-02T15:04:05.999999999Z07:00"

// lintRule is the input's Bloblang lint rule: the cross-field checks the
// constructor makes, so that `lint` reports them before a start does. A check
// of one field is that field's own rule (below), so lint points at its line.
func lintRule() string {
	checks := []lintrule.Check{
		{
			When:    `this.` + fieldStartTimestamp + `.or("") != "" && this.` + fieldStartPosition + `.or("` + consumer.StartTrimHorizon + `") != "` + consumer.StartAtTimestamp + `"`,
			Message: `"field ` + fieldStartTimestamp + `: only used with ` + fieldStartPosition + `: ` + consumer.StartAtTimestamp + `; set that or remove ` + fieldStartTimestamp + `"`,
		},
		{
			When:    `this.` + fieldStartPosition + `.or("") == "` + consumer.StartAtTimestamp + `" && this.` + fieldStartTimestamp + `.or("") == ""`,
			Message: `"field ` + fieldStartTimestamp + `: required with ` + fieldStartPosition + `: ` + consumer.StartAtTimestamp + `, an RFC3339 time such as 2024-05-01T12:00:00Z"`,
		},
		{
			// An ARN names the stream after "stream/"; with the region of the
			// ARN (or no region set) the name reaches the same stream.
			When:    `this.` + fieldStreams + `.any(a -> a.has_prefix("arn:") && this.` + fieldStreams + `.contains(a.re_replace_all("^arn:[^/]*/", "")) && (this.region.or("") == "" || a.split(":").index(3) == this.region))`,
			Message: `"field ` + fieldStreams + `: one stream is listed by name and by ARN; list it once (name both by ARN if they are streams of different accounts)"`,
		},
		{
			When:    `this.` + fieldIdlePollInterval + `.or("1s").parse_duration() < this.` + fieldPollInterval + `.or("200ms").parse_duration()`,
			Message: `"field ` + fieldIdlePollInterval + `: %s must be at least ` + fieldPollInterval + ` (%s)".format(this.` + fieldIdlePollInterval + `.or("1s"), this.` + fieldPollInterval + `.or("200ms"))`,
		},
	}
	checks = append(checks, streamsLintChecks()...)
	checks = append(checks, redeliveryLintChecks()...)
	checks = append(checks, checkpointer.LintChecks()...)
	checks = append(checks, awsconf.LintChecks()...)
	return lintrule.Mapping(checks...)
}

// lintStreams is the streams field's rule. Lint runs it on the list and on
// each entry: only the list is checked. Lint gives a rule an empty list both
// for `[]` and for a string in place of the list (which Benthos itself
// reports as "expected array value"), so the first message is worded for
// both.
var lintStreams = lintrule.Field(
	lintrule.Check{
		// An empty list passes the spec (the field is set); the
		// constructor refuses it, so lint does too.
		When:    `this.type() == "array" && this.length() == 0`,
		Message: `"field ` + fieldStreams + `: write a list of at least one stream name or ARN, e.g. [ orders ]"`,
	},
	lintrule.Check{
		When:    `this.type() == "array" && this.any(s -> s == "")`,
		Message: `"field ` + fieldStreams + `: an entry is empty; list stream names or ARNs"`,
	},
	lintrule.Check{
		When:    `this.type() == "array" && this.unique().length() < this.length()`,
		Message: `"field ` + fieldStreams + `: a stream is listed twice; list each stream once"`,
	},
)

// lintStartTimestamp is the start_timestamp field's rule.
var lintStartTimestamp = lintrule.Field(lintrule.Check{
	When:    `this.type() == "string" && this != "" && this.ts_parse("` + rfc3339Layout + `").catch(null) == null`,
	Message: `"field ` + fieldStartTimestamp + `: %q is not an RFC3339 time, e.g. 2024-05-01T12:00:00Z".format(this)`,
})

// checkStreams rejects a stream listed twice, also by its name and its ARN
// (the same rule as lintRule): both would read the same shards under the same
// checkpoints. An ARN of another region than the configured one names
// another stream.
func checkStreams(streams []string, region string) error {
	seen := map[string]bool{}
	for _, s := range streams {
		if s == "" {
			return fmt.Errorf("field %s: an entry is empty; list stream names or ARNs", fieldStreams)
		}
		if seen[s] {
			return fmt.Errorf("field %s: %s is listed twice; list each stream once", fieldStreams, s)
		}
		seen[s] = true
	}
	for _, s := range streams {
		if !kinesisx.IsARN(s) {
			continue
		}
		parts := strings.SplitN(s, ":", 6)
		_, name, ok := strings.Cut(s, "/")
		if !ok || len(parts) < 6 || (region != "" && parts[3] != region) {
			continue
		}
		if slices.Contains(streams, name) {
			return fmt.Errorf("field %s: %s and %s are one stream; list it once (name both by ARN if they are streams of different accounts)", fieldStreams, name, s)
		}
	}
	return nil
}
