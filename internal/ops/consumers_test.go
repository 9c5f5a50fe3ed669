package ops

import (
	"bytes"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/kinesis"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/connect-kinesis/connect-kinesis/internal/consumer/source"
	"github.com/connect-kinesis/connect-kinesis/internal/kinesisx"
	"github.com/connect-kinesis/connect-kinesis/internal/testenv"
)

func TestIntegrationConsumersListAndDeregister(t *testing.T) {
	emu := testenv.NewKinesisMock(t)
	arn := emu.MustCreateStream(t, "consumers", 1)
	c := emu.Client()
	_, err := source.EnsureStreamConsumer(t.Context(), c, arn, "app-1", "", kinesisx.DefaultBackoff)
	require.NoError(t, err)

	var out bytes.Buffer
	require.NoError(t, listConsumers(t.Context(), &out, c, arn))
	assert.Contains(t, out.String(), "app-1")
	assert.Contains(t, out.String(), "ACTIVE")

	require.NoError(t, deregisterConsumer(t.Context(), c, arn, "app-1"))
	left, err := c.ListStreamConsumers(t.Context(), &kinesis.ListStreamConsumersInput{StreamARN: aws.String(arn)})
	require.NoError(t, err)
	for _, sc := range left.Consumers {
		assert.NotEqual(t, "ACTIVE", string(sc.ConsumerStatus), "consumer %s still active", aws.ToString(sc.ConsumerName))
	}

	err = deregisterConsumer(t.Context(), c, arn, "no-such")
	require.Error(t, err)
	assert.Contains(t, err.Error(), "flag --name")
}
