package input

import (
	"context"
	"testing"
	"time"

	"github.com/redpanda-data/benthos/v4/public/service"
	"github.com/stretchr/testify/require"

	"github.com/connect-kinesis/connect-kinesis/internal/testenv"
)

// A Redis outage longer than the lease period stops the readers (they can
// no longer prove they own their shards); once Redis is back they resume
// from the checkpoints and nothing is lost.
func TestIntegrationRedisOutageLosesNothing(t *testing.T) {
	t.Parallel()
	emu := testenv.NewKinesisMock(t)
	red := testenv.NewRedis(t)
	const stream = "outage"
	emu.MustCreateStream(t, stream, 2)
	writeN(t, emu, stream, "before", 300)
	col := &collector{}
	startStream(t, inputYAML(stream, emu.Endpoint, red.URL(), "g", ""), func(_ context.Context, b service.MessageBatch) error {
		col.add(b)
		return nil
	})
	require.Eventually(t, func() bool { return col.distinct() == 300 }, 30*time.Second, 100*time.Millisecond)

	require.NoError(t, red.Pause())
	writeN(t, emu, stream, "during", 300)
	// Longer than lease.period (3s in inputYAML): every lease runs out.
	time.Sleep(4 * time.Second)
	require.NoError(t, red.Resume())
	writeN(t, emu, stream, "after", 300)

	require.Eventually(t, func() bool { return col.distinct() == 900 }, 60*time.Second, 100*time.Millisecond)
	assertShardOrder(t, col.snapshot())
}
