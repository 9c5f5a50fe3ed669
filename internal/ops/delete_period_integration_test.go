package ops

import (
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/connect-kinesis/connect-kinesis/internal/testenv"
)

// TestIntegrationDeleteJudgesLiveMembersByTheGivenLeasePeriod settles the
// reading that `delete` judges live members by the command's --lease-period
// (10 s by default), not the pipelines' lease.period: a pipeline with a
// 30 s lease.period heartbeats every 10 s, so 15 s after its last heartbeat
// it is running. A member holding a live lease is taken as running whatever
// its heartbeat; an idle one is judged by --lease-period (documented: pass
// the pipelines' lease.period), and the output says which period judged.
func TestIntegrationDeleteJudgesLiveMembersByTheGivenLeasePeriod(t *testing.T) {
	t.Parallel()
	r := testenv.NewRedis(t)
	const arn = "arn:aws:kinesis:us-east-1:000000000000:stream/orders"
	args := func(group string, extra ...string) []string {
		return append([]string{"delete", "--redis-url", r.URL(), "--group", group, "--stream", "orders", "--stream-id", arn, "--yes"}, extra...)
	}
	heartbeat15sAgo := func(group string) {
		st := groupStore(t, r.URL(), group, arn)
		_, err := st.Join(t.Context())
		require.NoError(t, err)
		c := r.Client()
		defer c.Close()
		at := time.Now().Add(-15 * time.Second).UnixMilli()
		require.NoError(t, c.ZAdd(t.Context(), st.Keys().Members, redis.Z{Score: float64(at), Member: "pipeline-1"}).Err())
	}

	heartbeat15sAgo("long-lease")
	out, err := runCLI(t.Context(), args("long-lease", "--lease-period", "30s")...)
	require.Error(t, err, out)
	assert.Contains(t, err.Error(), "pipeline-1")

	// Holding a live lease, the member runs whatever --lease-period says,
	// and --force does not override it.
	heartbeat15sAgo("holding")
	_, err = groupStore(t, r.URL(), "holding", arn).Acquire(t.Context(), "shardId-000000000000", "pipeline-1")
	require.NoError(t, err)
	out, err = runCLI(t.Context(), args("holding", "--force")...)
	require.Error(t, err, out)
	assert.Contains(t, err.Error(), "pipeline-1")

	heartbeat15sAgo("default-period")
	out, err = runCLI(t.Context(), args("default-period")...)
	require.NoError(t, err, "the reading holds: with the default --lease-period the member is taken as stopped")
	assert.Contains(t, out, "instances were judged running by a heartbeat within --lease-period 10s")
}
