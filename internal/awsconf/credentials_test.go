package awsconf

import (
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/kinesis"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// Without credentials anywhere, a Kinesis call says which fields and
// environment variables give them (issue 39 item 4: it said only the SDK's
// chain, "get credentials: failed to refresh cached credentials, no EC2
// IMDS role found, ...").
func TestMissingCredentialsNameTheFields(t *testing.T) {
	isolate(t)
	s := Settings{Region: "us-east-1", Endpoint: "http://127.0.0.1:1"}
	cfg, err := s.Load(t.Context())
	require.NoError(t, err)
	_, err = s.KinesisClient(cfg).ListShards(t.Context(), &kinesis.ListShardsInput{StreamName: aws.String("orders")})
	require.Error(t, err)
	t.Log(err)
	for _, want := range []string{"field credentials: no AWS credentials found", "credentials.id", "credentials.profile", "AWS_ACCESS_KEY_ID", "AWS_PROFILE"} {
		assert.Contains(t, err.Error(), want)
	}

	s.Profile = "nope"
	t.Setenv("AWS_CONFIG_FILE", "") // a profile that no file names
	cfg, err = s.Load(t.Context())
	if err == nil {
		_, err = s.KinesisClient(cfg).ListShards(t.Context(), &kinesis.ListShardsInput{StreamName: aws.String("orders")})
	}
	require.Error(t, err)
	assert.Contains(t, err.Error(), "nope", "a missing profile is named")
}
