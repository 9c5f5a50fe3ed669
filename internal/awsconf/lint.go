package awsconf

import (
	"fmt"
	"regexp"

	"github.com/connect-kinesis/connect-kinesis/internal/lintrule"
)

// regionPattern is the shape of every AWS region name (us-east-1,
// eu-central-2, us-gov-west-1, cn-north-1). The SDK resolves any such name
// to an endpoint, so a name of this shape that no region has is only found
// by resolving its endpoint (see Load). With a custom endpoint (an emulator)
// the region is only a signing name and is not checked.
var regionPattern = regexp.MustCompile(`^[a-z]{2}(-[a-z0-9]+)+-[0-9]+$`)

// LintChecks are the cross-field rules of Fields for a plugin's lint rule; the
// same rules are enforced by Settings.Validate.
func LintChecks() []lintrule.Check {
	return []lintrule.Check{
		{
			When:    `(this.credentials.id.or("") == "") != (this.credentials.secret.or("") == "")`,
			Message: `"fields credentials.id and credentials.secret: set both for static credentials, or neither to use a profile or the default chain"`,
		},
		{
			When:    `this.credentials.id.or("") != "" && this.credentials.profile.or("") != ""`,
			Message: `"fields credentials.id and credentials.profile: set static keys or a profile, not both"`,
		},
		{
			When:    `this.credentials.role_external_id.or("") != "" && this.credentials.role.or("") == ""`,
			Message: `"field credentials.role_external_id: it needs credentials.role, the ARN of the role to assume"`,
		},
		{
			When:    fmt.Sprintf(`this.region.or("") != "" && this.endpoint.or("") == "" && !this.region.re_match(%q)`, regionPattern.String()),
			Message: `"field region: %q is not an AWS region name; write it like us-east-1".format(this.region)`,
		},
	}
}
