// Package lintrule builds the Bloblang lint rule of a plugin's ConfigSpec from
// checks contributed by the packages that own its fields, so that
// `connect-kinesis lint` rejects the cross-field mistakes the constructors
// reject at start.
//
// A rule sees the plugin's config as written, without defaults: a check reads
// an optional field with `.or(default)`.
package lintrule

import (
	"strings"

	// The rules use ts_parse and parse_duration, Bloblang methods that
	// Benthos' pure components register. Benthos parses a lint rule when
	// the spec is built, in the plugin's init; importing them here makes
	// them registered first, whatever else the binary imports.
	_ "github.com/redpanda-data/benthos/v4/public/components/pure"
)

// Check is one rule: when the Bloblang condition When holds, lint reports
// Message, a Bloblang string expression that names the field and the fix.
type Check struct {
	When    string
	Message string
}

// Mapping returns the lint rule for service.ConfigSpec.LintRule: an array of
// the messages of every check whose condition holds. A check whose condition
// cannot be evaluated (a field of the wrong type) reports nothing here; the
// field's own type check reports it.
func Mapping(checks ...Check) string {
	var b strings.Builder
	b.WriteString("root = [\n")
	for _, c := range checks {
		b.WriteString("  if (")
		b.WriteString(c.When)
		b.WriteString(").catch(false) { ")
		b.WriteString(c.Message)
		b.WriteString(" } else { null },\n")
	}
	b.WriteString("].filter(m -> m != null)\n")
	return b.String()
}

// Field returns the lint rule of one field (service.ConfigField.LintRule):
// in its checks `this` is the field's value, and lint reports each message
// at the field's own line, where a plugin's rule (Mapping) can only point at
// the plugin's block. A check of one field belongs here; only a check that
// compares fields belongs in the plugin's rule.
func Field(checks ...Check) string { return Mapping(checks...) }

// Duration is the lint rule of a duration field at path (as the user writes
// it, e.g. checkpoint.commit_period): the constructor's parse refuses a
// number other than 0 (lint sees it as a string) ("time: missing unit") and a string that is not a Go
// duration, so lint refuses them too, with example as the fix.
func Duration(path, example string) string {
	bare := `this.string().re_match("^[-+]?[0-9.]+$")`
	return Field(
		Check{
			When:    bare + ` && this.string().parse_duration().catch(null) == null`,
			Message: `"field ` + path + `: %v has no unit; write it like ` + example + ` (units: ms, s, m, h)".format(this)`,
		},
		Check{
			When:    `!` + bare + ` && this.string().parse_duration().catch(null) == null`,
			Message: `"field ` + path + `: %q is not a duration; write it like ` + example + ` (units: ms, s, m, h)".format(this)`,
		},
	)
}

// Enum is the lint rule of a field at path that takes one of values: Benthos'
// own check of an enum field says only "value x is not a valid option for
// this field", so this rule names the values, with hint (may be empty) for a
// word users bring from elsewhere.
func Enum(path, hint string, values ...string) string {
	list := strings.Join(values, ", ")
	quoted := make([]string, len(values))
	for i, v := range values {
		quoted[i] = `"` + v + `"`
	}
	if hint != "" {
		hint = "; " + hint
	}
	return Field(Check{
		When:    `this.type() == "string" && ![` + strings.Join(quoted, ", ") + `].contains(this)`,
		Message: `"field ` + path + `: %s is not one of ` + list + strings.ReplaceAll(hint, `"`, `\"`) + `".format(this)`,
	})
}
