package checkpointer

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/connect-kinesis/connect-kinesis/internal/consumer"
	"github.com/connect-kinesis/connect-kinesis/internal/testenv"
)

// startSentinel runs a redis-server in Sentinel mode monitoring master as
// "mymaster" and returns its address.
func startSentinel(t *testing.T, master *testenv.Redis) string {
	t.Helper()
	port, err := testenv.FreePort()
	require.NoError(t, err)
	dir := t.TempDir()
	conf := filepath.Join(dir, "sentinel.conf")
	require.NoError(t, os.WriteFile(conf, []byte(fmt.Sprintf(
		"port %d\nbind 127.0.0.1\ndir %s\nsentinel monitor mymaster 127.0.0.1 %d 1\nsentinel auth-pass mymaster %s\n",
		port, dir, master.Port, master.Opts.Password)), 0o600))
	cmd := exec.Command("redis-server", conf, "--sentinel")
	if err := cmd.Start(); err != nil {
		testenv.Require(t, "starting redis-server --sentinel", err)
	}
	t.Cleanup(func() {
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
	})
	addr := fmt.Sprintf("127.0.0.1:%d", port)
	sc := redis.NewSentinelClient(&redis.Options{Addr: addr})
	defer sc.Close()
	require.Eventually(t, func() bool {
		_, err := sc.GetMasterAddrByName(t.Context(), "mymaster").Result()
		return err == nil
	}, 15*time.Second, 50*time.Millisecond, "sentinel did not come up")
	return addr
}

func TestIntegrationRedisSentinel(t *testing.T) {
	master := testenv.NewRedis(t, testenv.RedisOptions{Password: "master-pw"})
	sentinel := startSentinel(t, master)

	cfg := DefaultConfig()
	// The URL names the sentinel; its password is the master's.
	cfg.RedisURL = "redis://:master-pw@" + sentinel
	cfg.RedisKind, cfg.RedisMaster, cfg.Group = KindFailover, "mymaster", "sentinel"
	c, err := New(t.Context(), cfg, nil, nil)
	require.NoError(t, err)
	defer c.Close()
	s := c.Stream("orders")
	l, err := leaseOf(s.Acquire(t.Context(), "shard-1", "a"))
	require.NoError(t, err)
	require.NoError(t, s.Commit(t.Context(), l, consumer.Position{Sequence: "77"}))

	// The write reached the master the sentinel names.
	mc := master.Client()
	defer mc.Close()
	v, err := mc.HGet(t.Context(), s.Keys().Checkpoints, "shard-1").Result()
	require.NoError(t, err)
	assert.Equal(t, "77", v)
}
