package input

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/redpanda-data/benthos/v4/public/service"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/connect-kinesis/connect-kinesis/internal/testenv"
)

func TestIntegrationNackedBatchesAreRedeliveredInOrder(t *testing.T) {
	t.Parallel()
	emu := testenv.NewKinesisMock(t)
	red := testenv.NewRedis(t)
	for _, tc := range []struct {
		name   string
		replay bool
	}{
		{"auto_replay_nacks true", true},
		{"auto_replay_nacks false", false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			stream := fmt.Sprintf("nack-%t", tc.replay)
			const n = 1500
			emu.MustCreateStream(t, stream, 3)
			keys, payloads := make([]string, n), make([]string, n)
			for i := range n {
				keys[i], payloads[i] = fmt.Sprintf("k%d", i), fmt.Sprintf("r%05d", i)
			}
			// Small writes so that each shard yields many batches.
			for i := 0; i < n; i += 100 {
				putRecords(t, emu.Client(), stream, keys[i:i+100], payloads[i:i+100])
			}

			var mu sync.Mutex
			batches := 0
			failed := map[string]bool{}
			ok := &collector{}
			extra := fmt.Sprintf("  limit: 40\n  auto_replay_nacks: %t\n", tc.replay)
			rs := startStream(t, inputYAML(stream, emu.Endpoint, red.URL(), "g", extra), func(_ context.Context, b service.MessageBatch) error {
				mu.Lock()
				batches++
				first, _ := b[0].AsBytes()
				if batches%10 == 0 && !failed[string(first)] {
					failed[string(first)] = true
					mu.Unlock()
					return errors.New("simulated output failure")
				}
				mu.Unlock()
				ok.add(b)
				return nil
			})
			require.Eventually(t, func() bool { return ok.distinct() == n }, 60*time.Second, 100*time.Millisecond)
			rs.stop(t)
			mu.Lock()
			assert.NotEmpty(t, failed, "some batches were nacked")
			mu.Unlock()
			ds := ok.snapshot()
			assert.Len(t, ds, n, "each record is acked exactly once")
			// With shard_max_in_flight 1 even redeliveries keep shard order.
			last := map[string]string{}
			for _, d := range ds {
				if prev, ok := last[d.shard]; ok {
					assert.Truef(t, seqLess(prev, d.seq), "shard %s: %s acked after %s", d.shard, d.seq, prev)
				}
				last[d.shard] = d.seq
			}
		})
	}
}
