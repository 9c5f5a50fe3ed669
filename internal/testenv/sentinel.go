package testenv

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
)

// NewReplica starts a redis-server replicating master (with its password)
// and waits until the replication link is up.
func NewReplica(tb testing.TB, master *Redis) *Redis {
	tb.Helper()
	args := []string{"--replicaof", "127.0.0.1", itoa(master.Port)}
	if master.Opts.Password != "" {
		args = append(args, "--masterauth", master.Opts.Password)
	}
	r := NewRedis(tb, RedisOptions{Password: master.Opts.Password, Args: args, Server: master.Opts.Server})
	c := r.Client()
	defer c.Close()
	deadline := time.Now().Add(15 * time.Second)
	for {
		info, err := c.Info(tb.Context(), "replication").Result()
		if err == nil && strings.Contains(info, "master_link_status:up") {
			return r
		}
		if time.Now().After(deadline) {
			tb.Fatalf("replica of %s did not sync: %v %s", master.Addr, err, info)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// Sentinel is a redis-server in Sentinel mode.
type Sentinel struct {
	Addr string
	proc *Process
}

// SentinelMaster is the master name NewSentinel monitors.
const SentinelMaster = "mymaster"

// NewSentinel starts a Sentinel (redis-server --sentinel) monitoring master
// as SentinelMaster, with a quorum of one and fast failure detection (1s)
// so a test can fail the master over in seconds. It stops when the test
// ends.
func NewSentinel(tb testing.TB, master *Redis) *Sentinel {
	tb.Helper()
	s, err := startSentinel(tb.Context(), master, tb.TempDir())
	Require(tb, "starting redis-server --sentinel", err)
	tb.Cleanup(func() { s.proc.Kill() })
	return s
}

func startSentinel(ctx context.Context, master *Redis, dir string) (*Sentinel, error) {
	if _, err := lookPath("redis-server"); err != nil {
		return nil, err
	}
	port, err := FreePort()
	if err != nil {
		return nil, err
	}
	conf := filepath.Join(dir, "sentinel.conf")
	lines := []string{
		fmt.Sprintf("port %d", port),
		"bind 127.0.0.1",
		"dir " + dir,
		fmt.Sprintf("sentinel monitor %s 127.0.0.1 %d 1", SentinelMaster, master.Port),
		fmt.Sprintf("sentinel down-after-milliseconds %s 1000", SentinelMaster),
		fmt.Sprintf("sentinel failover-timeout %s 5000", SentinelMaster),
	}
	if master.Opts.Password != "" {
		lines = append(lines, fmt.Sprintf("sentinel auth-pass %s %s", SentinelMaster, master.Opts.Password))
	}
	if err := os.WriteFile(conf, []byte(strings.Join(lines, "\n")+"\n"), 0o600); err != nil {
		return nil, err
	}
	p, err := startProcess("redis-sentinel", nil, dir, "redis-server", conf, "--sentinel")
	if err != nil {
		return nil, err
	}
	s := &Sentinel{Addr: fmt.Sprintf("127.0.0.1:%d", port), proc: p}
	return s, waitReady(ctx, p, 15*time.Second, func(ctx context.Context) error {
		sc := redis.NewSentinelClient(&redis.Options{Addr: s.Addr, MaxRetries: -1})
		defer sc.Close()
		return sc.GetMasterAddrByName(ctx, SentinelMaster).Err()
	})
}

// MasterAddr asks the Sentinel which server is the master now.
func (s *Sentinel) MasterAddr(ctx context.Context) (string, error) {
	sc := redis.NewSentinelClient(&redis.Options{Addr: s.Addr, MaxRetries: -1})
	defer sc.Close()
	hp, err := sc.GetMasterAddrByName(ctx, SentinelMaster).Result()
	if err != nil {
		return "", err
	}
	return strings.Join(hp, ":"), nil
}
