package awsconf

import (
	"context"
	"fmt"

	"github.com/aws/aws-sdk-go-v2/aws"

	"github.com/connect-kinesis/connect-kinesis/internal/kinesisx"
)

// explainedCredentials names, when credentials cannot be had, the fields and
// environment variables that give them. The SDK's own error is the chain it
// tried ("failed to refresh cached credentials, no EC2 IMDS role found,
// operation error ec2imds: GetMetadata ..."), which says what failed but
// not what to set; it stays at the end, for the details.
type explainedCredentials struct {
	provider aws.CredentialsProvider
	settings Settings
}

func (e explainedCredentials) Retrieve(ctx context.Context) (aws.Credentials, error) {
	c, err := e.provider.Retrieve(ctx)
	if err == nil || ctx.Err() != nil {
		return c, err
	}
	return c, kinesisx.MarkPermanent(e.explain(err))
}

// explain names what to set for the settings in use.
func (e explainedCredentials) explain(err error) error {
	switch s := e.settings; {
	case s.Role != "":
		return fmt.Errorf("field %s.%s: assuming %s failed; check that the credentials below it may assume it (and %s.%s, if the role asks for one): %w", FieldCredentials, FieldRole, s.Role, FieldCredentials, FieldRoleExternalID, err)
	case s.Profile != "":
		return fmt.Errorf("field %s.%s: profile %q gives no credentials; check ~/.aws/credentials and ~/.aws/config (or AWS_SHARED_CREDENTIALS_FILE, AWS_CONFIG_FILE): %w", FieldCredentials, FieldProfile, s.Profile, err)
	case s.ID != "":
		return fmt.Errorf("fields %s.%s and %s.%s: %w", FieldCredentials, FieldID, FieldCredentials, FieldSecret, err)
	}
	return fmt.Errorf("field %s: no AWS credentials found: set %s.%s and %s.%s, or %s.%s; or AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY, or AWS_PROFILE, in the environment; or run with an instance, task or pod role (the SDK tried: %w)",
		FieldCredentials, FieldCredentials, FieldID, FieldCredentials, FieldSecret, FieldCredentials, FieldProfile, err)
}

// IsCredentialsProvider answers for the provider it wraps, so the SDK (and
// a test) still sees which provider gives the credentials.
func (e explainedCredentials) IsCredentialsProvider(target aws.CredentialsProvider) bool {
	return aws.IsCredentialsProvider(e.provider, target)
}
