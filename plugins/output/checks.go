package output

import (
	"fmt"

	"github.com/connect-kinesis/connect-kinesis/internal/awsconf"
	"github.com/connect-kinesis/connect-kinesis/internal/kinesisx"
	"github.com/connect-kinesis/connect-kinesis/internal/lintrule"
)

// lintRule is the output's Bloblang lint rule: the cross-field checks the
// constructor makes, so that `lint` reports them before a start does.
func lintRule() string {
	maxBytes := fmt.Sprintf(`this.%s.%s.or(%d)`, fieldAggregation, fieldAggMaxBytes, defaultAggMaxBytes)
	maxRecord := fmt.Sprintf(`this.%s.or(%d)`, fieldMaxRecordSize, kinesisx.DefaultMaxRecordSize)
	checks := []lintrule.Check{{
		When: fmt.Sprintf(`this.%s.%s.or(false) && (%s < %d || %s > %s)`, fieldAggregation, fieldAggEnabled, maxBytes, minAggMaxBytes, maxBytes, maxRecord),
		Message: fmt.Sprintf(`"field %s.%s: %%d is out of range; accepted values are %d to %s (%%d)".format(%s, %s)`,
			fieldAggregation, fieldAggMaxBytes, minAggMaxBytes, fieldMaxRecordSize, maxBytes, maxRecord),
	}}
	checks = append(checks, kinesisx.RetryLintChecks(kinesisx.DefaultBackoff)...)
	checks = append(checks, awsconf.LintChecks()...)
	return lintrule.Mapping(checks...)
}

// lintStream is the stream field's rule: `create` writes it empty, so that
// a pipeline never writes to a stream named in an example.
var lintStream = lintrule.Field(lintrule.Check{
	When:    `this.type() == "string" && this == ""`,
	Message: `"field ` + fieldStream + `: required: the name or ARN of the stream to write to, e.g. orders"`,
})
