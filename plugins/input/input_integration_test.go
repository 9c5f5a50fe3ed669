package input

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/redpanda-data/benthos/v4/public/service"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/connect-kinesis/connect-kinesis/internal/testenv"
)

// assertShardOrder checks that within each shard the first deliveries come
// in increasing sequence order.
func assertShardOrder(t *testing.T, ds []delivery) {
	t.Helper()
	last := map[string]string{}
	seen := map[string]bool{}
	for _, d := range ds {
		if seen[d.data] {
			continue
		}
		seen[d.data] = true
		if prev, ok := last[d.shard]; ok {
			assert.Truef(t, seqLess(prev, d.seq), "shard %s: %s delivered after %s", d.shard, d.seq, prev)
		}
		last[d.shard] = d.seq
	}
}

func singleInstance(t *testing.T, kind string) {
	emu := testenv.NewEmulator(t, kind)
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("%s output:\n%s", kind, emu.Process().Output())
		}
	})
	red := testenv.NewRedis(t)
	const stream, n = "orders", 3000
	arn := emu.MustCreateStream(t, stream, 3)
	keys, payloads := make([]string, n), make([]string, n)
	for i := range n {
		keys[i], payloads[i] = fmt.Sprintf("k%d", i%50), fmt.Sprintf("r%05d", i)
	}
	putRecords(t, emu.Client(), stream, keys, payloads)

	col := &collector{}
	yaml := inputYAML(stream, emu.Endpoint, red.URL(), "g1", "")
	rs := startStream(t, yaml, func(_ context.Context, b service.MessageBatch) error {
		col.add(b)
		return nil
	})
	require.Eventually(t, func() bool { return col.distinct() == n }, 60*time.Second, 100*time.Millisecond)
	rs.stop(t)
	ds := col.snapshot()
	assert.Len(t, ds, n, "a graceful run delivers each record once")
	assertShardOrder(t, ds)
	id := arn
	if id == "" {
		id = stream
	}
	ck := checkpoints(t, red.URL(), "g1", id)
	assert.Len(t, ck, 3, "every shard has a checkpoint")

	// A restart resumes after the committed checkpoints: nothing again.
	col2 := &collector{}
	rs2 := startStream(t, yaml, func(_ context.Context, b service.MessageBatch) error {
		col2.add(b)
		return nil
	})
	putRecords(t, emu.Client(), stream, []string{"after"}, []string{"after-restart"})
	require.Eventually(t, func() bool { return col2.distinct() == 1 }, 30*time.Second, 100*time.Millisecond)
	rs2.stop(t)
	assert.Equal(t, []string{"after-restart"}, dataOf(col2.snapshot()))
}

func dataOf(ds []delivery) []string {
	var out []string
	for _, d := range ds {
		out = append(out, d.data)
	}
	return out
}

func TestIntegrationSingleInstanceKinesisMock(t *testing.T) {
	t.Parallel()
	singleInstance(t, testenv.KindKinesisMock)
}

func TestIntegrationSingleInstanceKinesalite(t *testing.T) {
	t.Parallel()
	singleInstance(t, testenv.KindKinesalite)
}
