package input

import (
	"context"
	"testing"
	"time"

	"github.com/redpanda-data/benthos/v4/public/service"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/connect-kinesis/connect-kinesis/internal/testenv"
	"github.com/connect-kinesis/connect-kinesis/plugins/checkpointer"
)

// owners counts the live leases of a stream per owner.
func owners(t *testing.T, st *checkpointer.Store) map[string]int {
	ls, err := st.Leases(t.Context())
	require.NoError(t, err)
	out := map[string]int{}
	for _, l := range ls {
		if !l.Expired && l.Owner != "" {
			out[l.Owner]++
		}
	}
	return out
}

func TestIntegrationTwoInstancesBalanceAndHandOff(t *testing.T) {
	t.Parallel()
	emu := testenv.NewKinesisMock(t)
	red := testenv.NewRedis(t)
	const stream = "balance"
	arn := emu.MustCreateStream(t, stream, 4)
	cfg := checkpointer.DefaultConfig()
	cfg.RedisURL, cfg.Group = red.URL(), "g"
	ck, err := checkpointer.New(t.Context(), cfg, nil, nil)
	require.NoError(t, err)
	defer ck.Close()
	st := ck.Stream(arn)

	col := &collector{}
	consume := func(_ context.Context, b service.MessageBatch) error {
		col.add(b)
		return nil
	}
	yaml := inputYAML(stream, emu.Endpoint, red.URL(), "g", "")
	writeN(t, emu, stream, "a", 400)
	a := startStream(t, yaml, consume)
	require.Eventually(t, func() bool {
		o := owners(t, st)
		return len(o) == 1 && o[firstKey(o)] == 4
	}, 20*time.Second, 100*time.Millisecond, "the first instance takes every shard")

	b := startStream(t, yaml, consume)
	require.Eventually(t, func() bool {
		o := owners(t, st)
		if len(o) != 2 {
			return false
		}
		for _, n := range o {
			if n != 2 {
				return false
			}
		}
		return true
	}, 20*time.Second, 100*time.Millisecond, "two instances share four shards two and two")
	writeN(t, emu, stream, "b", 400)
	require.Eventually(t, func() bool { return col.distinct() == 800 }, 30*time.Second, 100*time.Millisecond)

	// A graceful stop hands the shards over: the other instance takes all
	// four and nothing is delivered twice.
	b.stop(t)
	require.Eventually(t, func() bool {
		o := owners(t, st)
		return len(o) == 1 && o[firstKey(o)] == 4
	}, 20*time.Second, 100*time.Millisecond, "the remaining instance takes the shards back")
	writeN(t, emu, stream, "c", 400)
	require.Eventually(t, func() bool { return col.distinct() == 1200 }, 30*time.Second, 100*time.Millisecond)
	a.stop(t)
	assert.Len(t, col.snapshot(), 1200, "hand-offs and graceful stops duplicate nothing")
}

func firstKey(m map[string]int) string {
	for k := range m {
		return k
	}
	return ""
}
