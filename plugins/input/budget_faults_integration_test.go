package input

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/redpanda-data/benthos/v4/public/service"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/connect-kinesis/connect-kinesis/internal/faultproxy"
	"github.com/connect-kinesis/connect-kinesis/internal/testenv"
)

// One input reads two streams; every GetShardIterator of one of them (12
// shards) is refused with AccessDeniedException, while the other (2
// shards) is written to under keyed load. Under a small budget the
// healthy stream's records all arrive: a shard whose reads fail holds no
// room (issue 33, item 1). Before the fix the denied shards took their
// room before reading and kept it while they retried, and the healthy
// stream delivered none of its records.
func TestIntegrationBudgetDeniedStreamDoesNotStallTheOther(t *testing.T) {
	t.Parallel()
	emu := testenv.NewKinesisMock(t)
	red := testenv.NewRedis(t)
	const denied, healthy = "denied", "healthy"
	emu.MustCreateStream(t, denied, 12)
	emu.MustCreateStream(t, healthy, 2)
	p, err := faultproxy.Start(emu.Endpoint, 11)
	require.NoError(t, err)
	t.Cleanup(func() { _ = p.Close() })
	p.Set("GetShardIterator", faultproxy.Rule{Hook: faultproxy.DenyStream(denied)})

	col := &collector{}
	in := streamsInputYAML([]string{denied, healthy}, p.URL, red.URL(), "g", `
  start_position: trim_horizon
  max_buffered_bytes: 4MiB
`)
	startStream(t, in, func(_ context.Context, b service.MessageBatch) error {
		col.add(b)
		return nil
	})

	// Keyed load on the healthy stream while the input reads.
	const rounds, perRound = 10, 128
	var wg sync.WaitGroup
	wg.Go(func() {
		for r := range rounds {
			var keys, payloads []string
			for i := range perRound {
				keys = append(keys, fmt.Sprintf("key-%02d", i%16))
				payloads = append(payloads, fmt.Sprintf("r%02d-%03d", r, i))
			}
			putRecords(t, emu.Client(), healthy, keys, payloads)
			time.Sleep(300 * time.Millisecond)
		}
	})
	wg.Wait()
	const want = rounds * perRound
	ok := assert.Eventually(t, func() bool { return col.distinct() == want }, 60*time.Second, 100*time.Millisecond)
	t.Logf("the healthy stream delivered %d of %d records; GetShardIterator: %+v", col.distinct(), want, p.Stats("GetShardIterator"))
	require.True(t, ok)
}
