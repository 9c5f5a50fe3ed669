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

// A stream deleted and created again between two listings is never seen
// missing by discovery; its reader holds an iterator of the deleted stream.
// The reader re-checks the stream's creation time when Kinesis does not
// find its shard though it is still listed: the deleted stream's state is
// cleared and the new stream read from the group's start.
func TestIntegrationStreamRecreatedBetweenListings(t *testing.T) {
	t.Parallel()
	emu := testenv.NewKinesisMock(t)
	red := testenv.NewRedis(t)
	const stream = "recreated-unseen"
	emu.MustCreateStream(t, stream, 1)
	client := emu.Client()
	putNumbered(t, client, stream, "old", 5)

	col := &collector{}
	logs := &lockedBuffer{}
	// Discovery lists once at start, then not for ten minutes, and the
	// reader of the caught-up shard reads every 3s, so neither sees the
	// stream missing: only the reader's next read can notice the
	// recreation.
	yaml := strings.NewReplacer("shard_discovery_interval: 1s", "shard_discovery_interval: 10m",
		"idle_poll_interval: 200ms", "idle_poll_interval: 3s").Replace(inputYAML(stream, emu.Endpoint, red.URL(), "g", ""))
	startLogged(t, yaml, col, logs)
	require.Eventually(t, func() bool { return col.distinct() == 5 }, 30*time.Second, 100*time.Millisecond)

	_, err := client.DeleteStream(t.Context(), &kinesis.DeleteStreamInput{StreamName: aws.String(stream)})
	require.NoError(t, err)
	require.Eventually(t, func() bool {
		_, err := client.DescribeStreamSummary(t.Context(), &kinesis.DescribeStreamSummaryInput{StreamName: aws.String(stream)})
		return kinesisx.ErrorCode(err) == kinesisx.CodeResourceNotFound
	}, 10*time.Second, 20*time.Millisecond)
	emu.MustCreateStream(t, stream, 1)
	putNumbered(t, client, stream, "new", 5)

	require.Eventually(t, func() bool { return countPrefixed(col, "new-") == 5 }, 45*time.Second, 100*time.Millisecond,
		"the recreated stream's records are not delivered (%d of 5)", countPrefixed(col, "new-"))
	assert.Equal(t, 5, countPrefixed(col, "old-"), "no record of the deleted stream is delivered again")
	assert.Len(t, col.snapshot(), 10, "nothing delivered twice")
	assert.Equal(t, 1, logs.count("The stream was deleted and created again"), "one error about the recreation")
}
