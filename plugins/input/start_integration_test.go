package input

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/redpanda-data/benthos/v4/public/service"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/connect-kinesis/connect-kinesis/internal/consumer"
	"github.com/connect-kinesis/connect-kinesis/internal/testenv"
)

func writeN(t *testing.T, emu *testenv.Kinesis, stream, prefix string, n int) {
	keys, payloads := make([]string, n), make([]string, n)
	for i := range n {
		keys[i], payloads[i] = fmt.Sprintf("k%d", i), fmt.Sprintf("%s-%d", prefix, i)
	}
	putRecords(t, emu.Client(), stream, keys, payloads)
}

func hasPrefix(ds []delivery, prefix string) int {
	n := 0
	for _, d := range ds {
		if strings.HasPrefix(d.data, prefix) {
			n++
		}
	}
	return n
}

func TestIntegrationStartPositions(t *testing.T) {
	t.Parallel()
	emu := testenv.NewKinesisMock(t)
	red := testenv.NewRedis(t)

	t.Run("latest skips what was written before", func(t *testing.T) {
		const stream = "latest"
		emu.MustCreateStream(t, stream, 2)
		writeN(t, emu, stream, "old", 100)
		// `latest` is the group's start less a margin for clock skew.
		time.Sleep(consumer.LatestSkewMargin + time.Second)
		col := &collector{}
		startStream(t, inputYAML(stream, emu.Endpoint, red.URL(), "g", "  start_position: latest\n"), func(_ context.Context, b service.MessageBatch) error {
			col.add(b)
			return nil
		})
		// The readers start at LATEST some time after the input starts:
		// keep writing until new records arrive.
		i := 0
		require.Eventually(t, func() bool {
			writeN(t, emu, stream, fmt.Sprintf("new%d", i), 20)
			i++
			return hasPrefix(col.snapshot(), "new") > 0
		}, 30*time.Second, 300*time.Millisecond)
		assert.Zero(t, hasPrefix(col.snapshot(), "old"), "nothing from before the start")
	})

	t.Run("latest skips nothing written while a shard without checkpoint changes hands", func(t *testing.T) {
		const stream = "latest-handover"
		arn := emu.MustCreateStream(t, stream, 1)
		writeN(t, emu, stream, "old", 10)
		time.Sleep(consumer.LatestSkewMargin + time.Second)
		extra := "  start_position: latest\n"
		first := &collector{}
		rs := startStream(t, inputYAML(stream, emu.Endpoint, red.URL(), "g", extra), func(_ context.Context, b service.MessageBatch) error {
			first.add(b)
			return nil
		})
		// The quiet shard is taken, nothing is read, so nothing is
		// committed; then the instance stops and 5 records are written
		// before another instance takes the shard.
		require.Eventually(t, func() bool { return liveLeases(t, red, "g", arn) == 1 }, 30*time.Second, 100*time.Millisecond)
		rs.stop(t)
		assert.Empty(t, checkpoints(t, red.URL(), "g", arn))
		writeN(t, emu, stream, "meanwhile", 5)
		second := &collector{}
		startStream(t, inputYAML(stream, emu.Endpoint, red.URL(), "g", extra), func(_ context.Context, b service.MessageBatch) error {
			second.add(b)
			return nil
		})
		require.Eventually(t, func() bool { return hasPrefix(second.snapshot(), "meanwhile") == 5 }, 30*time.Second, 100*time.Millisecond,
			"all 5 records written while the shard changed hands are delivered")
		assert.Zero(t, hasPrefix(first.snapshot(), "old")+hasPrefix(second.snapshot(), "old"), "nothing from before the group started")
	})

	t.Run("at_timestamp starts at the time", func(t *testing.T) {
		const stream = "attime"
		emu.MustCreateStream(t, stream, 2)
		writeN(t, emu, stream, "old", 100)
		// Arrival timestamps have millisecond resolution; a clear gap keeps
		// the boundary unambiguous.
		time.Sleep(1100 * time.Millisecond)
		ts := time.Now().UTC()
		time.Sleep(1100 * time.Millisecond)
		writeN(t, emu, stream, "new", 100)
		col := &collector{}
		extra := fmt.Sprintf("  start_position: at_timestamp\n  start_timestamp: %s\n", ts.Format(time.RFC3339Nano))
		startStream(t, inputYAML(stream, emu.Endpoint, red.URL(), "g", extra), func(_ context.Context, b service.MessageBatch) error {
			col.add(b)
			return nil
		})
		require.Eventually(t, func() bool { return hasPrefix(col.snapshot(), "new") == 100 }, 30*time.Second, 100*time.Millisecond)
		assert.Zero(t, hasPrefix(col.snapshot(), "old"))
	})

	t.Run("name and ARN share checkpoints", func(t *testing.T) {
		const stream = "byarn"
		arn := emu.MustCreateStream(t, stream, 2)
		require.NotEmpty(t, arn)
		writeN(t, emu, stream, "first", 200)
		col := &collector{}
		rs := startStream(t, inputYAML(stream, emu.Endpoint, red.URL(), "g", ""), func(_ context.Context, b service.MessageBatch) error {
			col.add(b)
			return nil
		})
		require.Eventually(t, func() bool { return col.distinct() == 200 }, 30*time.Second, 100*time.Millisecond)
		rs.stop(t)

		writeN(t, emu, stream, "second", 50)
		col2 := &collector{}
		rs2 := startStream(t, inputYAML(arn, emu.Endpoint, red.URL(), "g", ""), func(_ context.Context, b service.MessageBatch) error {
			col2.add(b)
			return nil
		})
		require.Eventually(t, func() bool { return col2.distinct() == 50 }, 30*time.Second, 100*time.Millisecond)
		rs2.stop(t)
		assert.Zero(t, hasPrefix(col2.snapshot(), "first"), "the ARN resumes from the name's checkpoints")
		assert.Len(t, checkpoints(t, red.URL(), "g", arn), 2)
	})
}
