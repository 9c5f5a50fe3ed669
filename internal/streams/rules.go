// Package streams chooses the streams an input reads while it runs: the
// rules (names, glob patterns and tags), their fields and validation, and
// the Lister that finds the streams matching them through ListStreams,
// DescribeStreamSummary and ListTagsForStream within their account-wide
// limits. Which instance lists, and where the result is shared, is the
// checkpointer's (plugins/checkpointer, discovery.go); starting and stopping
// readers as streams come and go is the consumer's.
package streams

import (
	"fmt"
	"maps"
	"path"
	"slices"
	"strings"

	"github.com/connect-kinesis/connect-kinesis/internal/kinesisx"
)

// Rules say which streams an input reads.
//
// An entry of `streams` without `*` or `?` names one stream (by name or
// ARN) and is read exactly as without discovery: resolved at connect,
// whatever its tags, never released because a listing lacks it (an ARN of
// another account is not in this account's listing). An entry with `*`
// (any run of characters) or `?` (one character) is a pattern of stream
// names: the streams of the account and region whose name matches it and
// that carry every tag of `stream_tags` are read, found again every
// `stream_discovery_interval`.
type Rules struct {
	// Names are the entries without a glob, as written.
	Names []string
	// Patterns are the entries with a glob.
	Patterns []string
	// Tags must all be carried (key and value) by a stream a pattern
	// found; empty for no condition.
	Tags map[string]string
}

// ParseRules sorts the entries of `streams` into names and patterns and
// checks them with `stream_tags`. The errors name the field and the fix.
func ParseRules(entries []string, tags map[string]string) (Rules, error) {
	var r Rules
	for _, e := range entries {
		if !IsPattern(e) {
			r.Names = append(r.Names, e)
			continue
		}
		if err := checkPattern(e); err != nil {
			return Rules{}, err
		}
		if slices.Contains(r.Patterns, e) {
			return Rules{}, fmt.Errorf("field %s: the pattern %q is listed twice; list each once", FieldStreams, e)
		}
		r.Patterns = append(r.Patterns, e)
	}
	for k, v := range tags {
		if k == "" {
			return Rules{}, fmt.Errorf("field %s: a tag key is empty; write key: value pairs, e.g. {team: payments}", FieldStreamTags)
		}
		if len(k) > 128 || len(v) > 256 {
			return Rules{}, fmt.Errorf("field %s: tag %q is longer than Kinesis allows (keys up to 128 characters, values up to 256)", FieldStreamTags, k)
		}
	}
	if len(tags) > 0 {
		if len(r.Patterns) == 0 {
			return Rules{}, fmt.Errorf("field %s: tags select among the streams a pattern of %s finds, and %s has none; add a pattern, e.g. \"*\" for every stream with these tags", FieldStreamTags, FieldStreams, FieldStreams)
		}
		r.Tags = maps.Clone(tags)
	}
	return r, nil
}

// IsPattern reports whether an entry of `streams` is a glob.
func IsPattern(entry string) bool { return strings.ContainsAny(entry, "*?") }

// checkPattern refuses what a pattern of stream names cannot be.
func checkPattern(p string) error {
	if kinesisx.IsARN(p) {
		return fmt.Errorf("field %s: %q: a pattern matches the names of the streams of the configured account and region; write the name part only, e.g. %q", FieldStreams, p, kinesisx.StreamName(p))
	}
	if strings.ContainsAny(p, `[]\`) {
		return fmt.Errorf("field %s: %q: patterns take `*` (any characters) and `?` (one character) only; stream names hold letters, digits, `_`, `.` and `-`", FieldStreams, p)
	}
	if strings.ContainsAny(p, "/:") {
		return fmt.Errorf("field %s: %q: a pattern matches stream names, which hold no `/` or `:`", FieldStreams, p)
	}
	return nil
}

// Dynamic reports whether the rules need discovery: a pattern.
func (r Rules) Dynamic() bool { return len(r.Patterns) > 0 }

// MatchName reports whether a stream name matches a pattern. It does not
// look at tags (see MatchTags) nor at the explicit names.
func (r Rules) MatchName(name string) bool {
	for _, p := range r.Patterns {
		// checkPattern left only `*`, `?` and name characters, which
		// path.Match reads as this package means them (names hold no `/`).
		if ok, _ := path.Match(p, name); ok {
			return true
		}
	}
	return false
}

// MatchTags reports whether a stream's tags carry every tag of the rules.
func (r Rules) MatchTags(tags map[string]string) bool {
	for k, v := range r.Tags {
		if got, ok := tags[k]; !ok || got != v {
			return false
		}
	}
	return true
}
