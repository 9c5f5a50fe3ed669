package input

import (
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/kinesis"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/connect-kinesis/connect-kinesis/internal/kinesisx"
	"github.com/connect-kinesis/connect-kinesis/internal/testenv"
)

// countPrefixed counts the distinct payloads delivered that start with p.
func countPrefixed(col *collector, p string) int {
	seen := map[string]bool{}
	for _, d := range col.snapshot() {
		if strings.HasPrefix(d.data, p) {
			seen[d.data] = true
		}
	}
	return len(seen)
}

// A stream deleted and created again under a fan-out input loses its
// stream consumer with it: the input registers the consumer again and
// reads the new stream's records.
func TestIntegrationEnhancedFanOutStreamRecreated(t *testing.T) {
	t.Parallel()
	emu := testenv.NewKinesisMock(t)
	red := testenv.NewRedis(t)
	const stream = "efo-recreated"
	emu.MustCreateStream(t, stream, 1)
	client := emu.Client()
	putNumbered(t, client, stream, "old", 5)

	col := &collector{}
	logs := &lockedBuffer{}
	startLogged(t, inputYAML(stream, emu.TLSEndpoint, red.URL(), "g", efoYAML), col, logs)
	require.Eventually(t, func() bool { return col.distinct() == 5 }, 30*time.Second, 100*time.Millisecond)

	_, err := client.DeleteStream(t.Context(), &kinesis.DeleteStreamInput{StreamName: aws.String(stream), EnforceConsumerDeletion: aws.Bool(true)})
	require.NoError(t, err)
	require.Eventually(t, func() bool {
		_, err := client.DescribeStreamSummary(t.Context(), &kinesis.DescribeStreamSummaryInput{StreamName: aws.String(stream)})
		return kinesisx.ErrorCode(err) == kinesisx.CodeResourceNotFound
	}, 10*time.Second, 100*time.Millisecond)
	// kinesis-mock keeps a live subscription open across the delete (AWS
	// ends it with ResourceNotFound), so here the input learns of the
	// deletion from its next listing: the stream stays deleted until then.
	require.Eventually(t, func() bool { return logs.count("The stream does not exist") > 0 }, 30*time.Second, 100*time.Millisecond,
		"the input never noticed the deleted stream")
	arn := emu.MustCreateStream(t, stream, 1)
	putNumbered(t, client, stream, "new", 5)

	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("input log:\n%s", logs.String())
		}
	})
	require.Eventually(t, func() bool { return countPrefixed(col, "new-") == 5 }, 60*time.Second, 100*time.Millisecond,
		"the recreated stream's records are not delivered (%d of 5)", countPrefixed(col, "new-"))
	out, err := client.ListStreamConsumers(t.Context(), &kinesis.ListStreamConsumersInput{StreamARN: aws.String(arn)})
	require.NoError(t, err)
	require.Len(t, out.Consumers, 1, "the consumer is registered on the new stream")
	assert.Equal(t, 5, countPrefixed(col, "old-"), "no record of the deleted stream is delivered again")
	assert.Len(t, col.snapshot(), 10, "nothing delivered twice")
}
