package input

import (
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/kinesis"
	"github.com/aws/aws-sdk-go-v2/service/kinesis/types"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/connect-kinesis/connect-kinesis/internal/testenv"
)

// With enhanced fan-out, a stream found while the input runs is read
// through a stream consumer registered for it under the group's name.
func TestIntegrationStreamFoundIsReadWithEnhancedFanOut(t *testing.T) {
	t.Parallel()
	emu := testenv.SharedKinesisMock(t)
	red := testenv.NewRedis(t)
	client := emu.Client()
	p := uniquePrefix("tefo")
	emu.MustCreateStream(t, p+"1", 1)
	putKeyed(t, client, p+"1", "a", 10)

	const interval = 5 * time.Second
	col := &streamCollector{}
	logs := &lockedBuffer{}
	startFollowing(t, followingYAML(p+"*", emu.TLSEndpoint, red.URL(), "a", interval, efoYAML), col, logs)
	require.Eventually(t, func() bool { n, _ := col.count(p+"1", "a-"); return n >= 10 }, 2*interval+30*time.Second, 100*time.Millisecond)

	arn2 := emu.MustCreateStream(t, p+"2", 2)
	putKeyed(t, client, p+"2", "a", 20)
	require.Eventually(t, func() bool { n, _ := col.count(p+"2", "a-"); return n >= 20 }, 3*interval+30*time.Second, 100*time.Millisecond, "the stream found is read")
	d, err := client.DescribeStreamConsumer(t.Context(), &kinesis.DescribeStreamConsumerInput{StreamARN: aws.String(arn2), ConsumerName: aws.String("g")})
	require.NoError(t, err, "a consumer is registered for the stream found")
	assert.Equal(t, types.ConsumerStatusActive, d.ConsumerDescription.ConsumerStatus)
	for _, s := range []string{p + "1", p + "2"} {
		_, dup := col.count(s, "a-")
		assert.Zero(t, dup, s)
	}
}
