package checkpointer

import (
	"bytes"
	"log/slog"
	"testing"

	"github.com/redpanda-data/benthos/v4/public/service"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/connect-kinesis/connect-kinesis/internal/testenv"
)

// TestIntegrationSimpleKindWarnsOfReplicas guards the reading on kind:
// simple against a primary with replicas (a managed primary endpoint with
// failover): closes are not waited for, so the input warns at connect when
// INFO shows replicas, and says nothing without them or when
// min_replicas_to_ack is set.
func TestIntegrationSimpleKindWarnsOfReplicas(t *testing.T) {
	t.Parallel()
	master := testenv.NewRedis(t)
	connect := func(t *testing.T, addr string, minReplicas int) string {
		var logs bytes.Buffer
		log := service.NewLoggerFromSlog(slog.New(slog.NewTextHandler(&logs, nil)))
		cfg := DefaultConfig()
		cfg.RedisURL, cfg.Group, cfg.MinReplicasToAck = "redis://"+addr, "simple-replicas", minReplicas
		c, err := New(t.Context(), cfg, log, nil)
		require.NoError(t, err)
		require.NoError(t, c.Close())
		return logs.String()
	}
	assert.NotContains(t, connect(t, master.Addr, AutoReplicas), "replicas", "no replica: no warning")
	testenv.NewReplica(t, master)
	out := connect(t, master.Addr, AutoReplicas)
	assert.Contains(t, out, "level=WARN")
	assert.Contains(t, out, "1 connected replica")
	assert.Contains(t, out, fieldPathRedisKind)
	assert.NotContains(t, connect(t, master.Addr, 1), "connected replica", "min_replicas_to_ack set: the operator chose")
}
