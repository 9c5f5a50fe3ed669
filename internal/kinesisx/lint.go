package kinesisx

import (
	"fmt"

	"github.com/connect-kinesis/connect-kinesis/internal/lintrule"
)

// RetryLintChecks are the cross-field rules of RetryFields(def) for a
// plugin's lint rule; Backoff.Validate enforces the same.
func RetryLintChecks(def Backoff) []lintrule.Check {
	initial := fmt.Sprintf(`this.%s.%s.or(%q)`, FieldBackoff, FieldInitialInterval, def.InitialInterval.String())
	maxInterval := fmt.Sprintf(`this.%s.%s.or(%q)`, FieldBackoff, FieldMaxInterval, def.MaxInterval.String())
	return []lintrule.Check{{
		When: maxInterval + `.parse_duration() < ` + initial + `.parse_duration()`,
		Message: fmt.Sprintf(`"field %s.%s: %%s is shorter than %s.%s (%%s); it must be at least as long".format(%s, %s)`,
			FieldBackoff, FieldMaxInterval, FieldBackoff, FieldInitialInterval, maxInterval, initial),
	}}
}
