package input

import (
	"context"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/redpanda-data/benthos/v4/public/service"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/connect-kinesis/connect-kinesis/internal/testenv"
)

func TestIntegrationMessageMetadata(t *testing.T) {
	t.Parallel()
	emu := testenv.SharedKinesisMock(t)
	red := testenv.NewRedis(t)
	const stream = "meta"
	emu.MustCreateStream(t, stream, 1)
	before := time.Now().Add(-time.Minute)
	putRecords(t, emu.Client(), stream, []string{"user-7"}, []string{"hello"})

	var mu sync.Mutex
	var meta map[string]string
	rs := startStream(t, inputYAML(stream, emu.Endpoint, red.URL(), "g", ""), func(_ context.Context, b service.MessageBatch) error {
		mu.Lock()
		defer mu.Unlock()
		meta = map[string]string{}
		_ = b[0].MetaWalk(func(k, v string) error {
			meta[k] = v
			return nil
		})
		return nil
	})
	require.Eventually(t, func() bool {
		mu.Lock()
		defer mu.Unlock()
		return meta != nil
	}, 30*time.Second, 50*time.Millisecond)
	rs.stop(t)

	assert.Equal(t, stream, meta[MetaStream])
	assert.Equal(t, "shardId-000000000000", meta[MetaShard])
	assert.Equal(t, "user-7", meta[MetaPartitionKey])
	assert.NotEmpty(t, meta[MetaSequenceNumber])
	assert.NotContains(t, meta, MetaSubSequence, "only aggregated records carry a sub-sequence number")
	at, err := time.Parse(time.RFC3339Nano, meta[MetaArrival])
	require.NoError(t, err)
	assert.True(t, at.After(before))
	_, err = strconv.ParseInt(meta[MetaMillisBehind], 10, 64)
	assert.NoError(t, err)
}
