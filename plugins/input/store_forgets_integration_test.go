package input

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redpanda-data/benthos/v4/public/service"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/connect-kinesis/connect-kinesis/internal/testenv"
)

// liveLeases counts the live leases of a stream identity, reading the
// lease hash as documented: shard -> "<owner>|<expiresAtMillis>|<token>".
func liveLeases(t *testing.T, red *testenv.Redis, group, streamID string) int {
	t.Helper()
	c := red.Client()
	defer c.Close()
	all, err := c.HGetAll(t.Context(), "kinesis:{"+group+":"+streamID+"}:lease").Result()
	require.NoError(t, err)
	n := 0
	for _, v := range all {
		parts := strings.Split(v, "|")
		if len(parts) < 3 || parts[0] == "" {
			continue
		}
		if exp, _ := strconv.ParseInt(parts[len(parts)-2], 10, 64); exp > time.Now().UnixMilli() {
			n++
		}
	}
	return n
}

// counting tallies deliveries per payload.
type counting struct {
	col collector
}

func (c *counting) handler(_ context.Context, b service.MessageBatch) error {
	c.col.add(b)
	return nil
}

func (c *counting) tally(prefix string) (distinct, duplicates int) {
	seen := map[string]int{}
	for _, d := range c.col.snapshot() {
		if strings.HasPrefix(d.data, prefix) {
			seen[d.data]++
		}
	}
	for _, n := range seen {
		duplicates += n - 1
	}
	return len(seen), duplicates
}

// TestIntegrationRedisComesBackEmpty restarts Redis without persistence
// while two instances read: the store forgets everything (group record,
// checkpoints, leases). The instances notice, keep what they hold and
// write it back, so nothing is lost, and shards are not read again from
// start_position.
func TestIntegrationRedisComesBackEmpty(t *testing.T) {
	t.Parallel()
	emu := testenv.NewKinesisMock(t)
	for _, start := range []string{"latest", "trim_horizon"} {
		t.Run(start, func(t *testing.T) {
			t.Parallel()
			red := testenv.NewRedis(t) // its own: the test empties it
			stream := "forget-" + start
			group := "g-" + start
			arn := emu.MustCreateStream(t, stream, 4)
			writeN(t, emu, stream, "before", 400)
			c := &counting{}
			extra := "  start_position: " + start + "\n"
			startStream(t, inputYAML(stream, emu.Endpoint, red.URL(), group, extra), c.handler)
			startStream(t, inputYAML(stream, emu.Endpoint, red.URL(), group, extra), c.handler)
			require.Eventually(t, func() bool { return liveLeases(t, red, group, arn) == 4 }, 30*time.Second, 100*time.Millisecond)
			if start == "trim_horizon" {
				require.Eventually(t, func() bool { d, _ := c.tally("before"); return d == 400 }, 30*time.Second, 100*time.Millisecond)
			}

			// Write 20 records every 100ms for 6s; Redis comes back empty
			// after 3s.
			var written atomic.Int64
			done := make(chan struct{})
			go func() {
				defer close(done)
				for i := range 60 {
					writeN(t, emu, stream, fmt.Sprintf("w%02d-", i), 20)
					written.Add(20)
					time.Sleep(100 * time.Millisecond)
				}
			}()
			time.Sleep(3 * time.Second)
			red.Kill()
			require.NoError(t, red.Start(t.Context()))
			<-done

			// Wait for every record (or 60s, to count what is missing), and
			// a little longer for late duplicates.
			for deadline := time.Now().Add(60 * time.Second); time.Now().Before(deadline); time.Sleep(100 * time.Millisecond) {
				if d, _ := c.tally("w"); int64(d) == written.Load() {
					break
				}
			}
			time.Sleep(2 * time.Second)
			d, dups := c.tally("w")
			_, beforeDups := c.tally("before")
			t.Logf("start_position %s: %d written while Redis came back empty, %d delivered (%d lost), %d duplicates; %d duplicates of the %d records read before",
				start, written.Load(), d, int(written.Load())-d, dups, beforeDups, 400)
			assert.Equal(t, int(written.Load()), d, "nothing lost")
			if start == "trim_horizon" {
				assert.Zero(t, beforeDups, "shards are not read again from the start")
			}
			// What was in flight and up to one commit period of reading
			// (200ms of 200 records/s) per shard, generously.
			assert.LessOrEqual(t, dups, 200)
			assertShardOrder(t, c.col.snapshot())
		})
	}
}
