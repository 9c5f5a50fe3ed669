package awsconf

import (
	"context"
	"net"
	"os"
	"path/filepath"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/credentials/stscreds"
	"github.com/redpanda-data/benthos/v4/public/service"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// isolate points the SDK's default chain at empty files and no environment
// credentials, so a developer's own ~/.aws never leaks into a test.
func isolate(t *testing.T) string {
	dir := t.TempDir()
	for _, k := range []string{"AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY", "AWS_SESSION_TOKEN", "AWS_PROFILE", "AWS_REGION", "AWS_DEFAULT_REGION", "AWS_ROLE_ARN", "AWS_WEB_IDENTITY_TOKEN_FILE"} {
		t.Setenv(k, "")
	}
	t.Setenv("AWS_CONFIG_FILE", filepath.Join(dir, "config"))
	t.Setenv("AWS_SHARED_CREDENTIALS_FILE", filepath.Join(dir, "credentials"))
	t.Setenv("AWS_EC2_METADATA_DISABLED", "true")
	resolveAll(t)
	return dir
}

// resolveAll makes every host name resolve, so a test needs no DNS.
func resolveAll(t *testing.T) {
	orig := lookupHost
	lookupHost = func(context.Context, string) ([]string, error) { return []string{"192.0.2.1"}, nil }
	t.Cleanup(func() { lookupHost = orig })
}

func parse(t *testing.T, yaml string) (Settings, error) {
	t.Helper()
	conf, err := service.NewConfigSpec().Fields(Fields()...).ParseYAML(yaml, nil)
	require.NoError(t, err)
	return SettingsFromParsed(conf)
}

func TestStaticCredentials(t *testing.T) {
	isolate(t)
	s, err := parse(t, `
region: eu-west-1
endpoint: http://127.0.0.1:4567
credentials: {id: AKIDEXAMPLE, secret: s3cr3t, token: tok}
`)
	require.NoError(t, err)
	cfg, err := s.Load(t.Context())
	require.NoError(t, err)
	assert.Equal(t, "eu-west-1", cfg.Region)
	creds, err := cfg.Credentials.Retrieve(t.Context())
	require.NoError(t, err)
	assert.Equal(t, "AKIDEXAMPLE", creds.AccessKeyID)
	assert.Equal(t, "s3cr3t", creds.SecretAccessKey)
	assert.Equal(t, "tok", creds.SessionToken)

	// The SDK does not retry: failsafe-go is the only retry loop.
	assert.Equal(t, 1, cfg.Retryer().MaxAttempts())

	client := s.KinesisClient(cfg)
	assert.Equal(t, "http://127.0.0.1:4567", aws.ToString(client.Options().BaseEndpoint))
}

func TestSharedProfile(t *testing.T) {
	dir := isolate(t)
	require.NoError(t, os.WriteFile(filepath.Join(dir, "credentials"), []byte(`[other]
aws_access_key_id = AKIDPROFILE
aws_secret_access_key = profilesecret
`), 0o600))
	require.NoError(t, os.WriteFile(filepath.Join(dir, "config"), []byte(`[profile other]
region = ap-south-1
`), 0o600))
	s, err := parse(t, `credentials: {profile: other}`)
	require.NoError(t, err)
	cfg, err := s.Load(t.Context())
	require.NoError(t, err)
	assert.Equal(t, "ap-south-1", cfg.Region, "region from the profile")
	creds, err := cfg.Credentials.Retrieve(t.Context())
	require.NoError(t, err)
	assert.Equal(t, "AKIDPROFILE", creds.AccessKeyID)
}

func TestDefaultChainFromEnvironment(t *testing.T) {
	isolate(t)
	t.Setenv("AWS_ACCESS_KEY_ID", "AKIDENV")
	t.Setenv("AWS_SECRET_ACCESS_KEY", "envsecret")
	t.Setenv("AWS_REGION", "us-west-2")
	s, err := parse(t, `{}`)
	require.NoError(t, err)
	cfg, err := s.Load(t.Context())
	require.NoError(t, err)
	assert.Equal(t, "us-west-2", cfg.Region)
	creds, err := cfg.Credentials.Retrieve(t.Context())
	require.NoError(t, err)
	assert.Equal(t, "AKIDENV", creds.AccessKeyID)
	assert.Nil(t, s.KinesisClient(cfg).Options().BaseEndpoint, "no endpoint: the region's AWS endpoint")
}

func TestAssumeRole(t *testing.T) {
	isolate(t)
	s, err := parse(t, `
region: us-east-1
credentials: {id: AKIDBASE, secret: base, role: "arn:aws:iam::123456789012:role/reader", role_external_id: ext-1}
`)
	require.NoError(t, err)
	cfg, err := s.Load(t.Context())
	require.NoError(t, err)
	cache, ok := cfg.Credentials.(*aws.CredentialsCache)
	require.True(t, ok, "assumed-role credentials are cached, got %T", cfg.Credentials)
	assert.True(t, cache.IsCredentialsProvider(&stscreds.AssumeRoleProvider{}), "credentials come from STS AssumeRole")
}

func TestNoRegionIsAClearError(t *testing.T) {
	isolate(t)
	s, err := parse(t, `credentials: {id: a, secret: b}`)
	require.NoError(t, err)
	_, err = s.Load(t.Context())
	require.Error(t, err)
	assert.Contains(t, err.Error(), "field region")
}

func TestValidation(t *testing.T) {
	for name, tc := range map[string]struct{ yaml, want string }{
		"id without secret":       {`credentials: {id: a}`, "credentials.secret"},
		"secret without id":       {`credentials: {secret: a}`, "credentials.id"},
		"keys and profile":        {`credentials: {id: a, secret: b, profile: p}`, "credentials.profile"},
		"external id, no role":    {`credentials: {role_external_id: x}`, "credentials.role"},
		"endpoint without scheme": {`endpoint: "localhost:4567"`, "field endpoint"},
		"region with spaces":      {`region: "us east 1"`, `field region: "us east 1" is not an AWS region name`},
	} {
		t.Run(name, func(t *testing.T) {
			conf, err := service.NewConfigSpec().Fields(Fields()...).ParseYAML(tc.yaml, nil)
			if err == nil {
				_, err = SettingsFromParsed(conf)
			}
			require.Error(t, err)
			assert.Contains(t, err.Error(), tc.want)
		})
	}
}

// A misspelt region fails at connect with an error naming the field, instead
// of a DNS error retried as a network fault.
func TestBadRegionNamesTheField(t *testing.T) {
	isolate(t)
	var looked []string
	lookupHost = func(_ context.Context, host string) ([]string, error) {
		looked = append(looked, host)
		if host == "kinesis.us-east-1.amazonaws.com" {
			return []string{"192.0.2.1"}, nil
		}
		return nil, &net.DNSError{Err: "no such host", Name: host, IsNotFound: true}
	}
	for name, tc := range map[string]struct {
		yaml, env, want string
	}{
		// Issue 60 item 10: the message named only a wrong region, when a
		// machine that cannot resolve AWS names gets the same answer.
		"unknown region":            {yaml: `{region: eu-west-99, credentials: {id: a, secret: b}}`, want: `field region: the Kinesis endpoint of "eu-west-99", kinesis.eu-west-99.amazonaws.com, does not resolve here: either the region name is wrong (write it like us-east-1), or this machine's DNS cannot resolve AWS names (then set endpoint to a Kinesis it reaches: a VPC endpoint, a proxy or an emulator)`},
		"unknown region from env":   {yaml: `{credentials: {id: a, secret: b}}`, env: "eu-west-99", want: `field region: the Kinesis endpoint of "eu-west-99"`},
		"not a region from env":     {yaml: `{credentials: {id: a, secret: b}}`, env: "us east 1", want: `field region: "us east 1" is not an AWS region name`},
		"known region":              {yaml: `{region: us-east-1, credentials: {id: a, secret: b}}`},
		"custom endpoint, no check": {yaml: `{region: local, endpoint: "http://127.0.0.1:4567", credentials: {id: a, secret: b}}`},
	} {
		t.Run(name, func(t *testing.T) {
			t.Setenv("AWS_REGION", tc.env)
			s, err := parse(t, tc.yaml)
			require.NoError(t, err)
			_, err = s.Load(t.Context())
			if tc.want == "" {
				require.NoError(t, err)
				return
			}
			require.Error(t, err)
			assert.Contains(t, err.Error(), tc.want)
		})
	}
	assert.NotContains(t, looked, "kinesis.local.amazonaws.com", "a custom endpoint is not resolved as a region")
}
