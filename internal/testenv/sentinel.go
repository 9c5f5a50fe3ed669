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
	s, err := StartSentinel(tb.Context(), master, tb.TempDir(), SentinelOptions{DownAfter: time.Second, FailoverTimeout: 5 * time.Second})
	Require(tb, "starting redis-server --sentinel", err)
	tb.Cleanup(s.Close)
	return s
}

// SentinelOptions shape a Sentinel's monitoring of its master.
type SentinelOptions struct {
	// DownAfter is down-after-milliseconds: how long the master may not
	// answer before the Sentinel fails it over on its own.
	DownAfter time.Duration
	// FailoverTimeout is failover-timeout: among others, how long a
	// replica may replicate from an address other than the master's
	// before the Sentinel points it at the master (+fix-slave-config),
	// and the least time between two failovers it starts on its own.
	FailoverTimeout time.Duration
}

// StartSentinel starts a Sentinel monitoring master as SentinelMaster with
// a quorum of one, its files in dir. Close stops it.
func StartSentinel(ctx context.Context, master *Redis, dir string, o SentinelOptions) (*Sentinel, error) {
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
		fmt.Sprintf("sentinel down-after-milliseconds %s %d", SentinelMaster, o.DownAfter.Milliseconds()),
		fmt.Sprintf("sentinel failover-timeout %s %d", SentinelMaster, o.FailoverTimeout.Milliseconds()),
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

// Failover asks the Sentinel to promote a replica of its master now
// (SENTINEL FAILOVER), whether or not the master answers.
func (s *Sentinel) Failover(ctx context.Context) error {
	sc := redis.NewSentinelClient(&redis.Options{Addr: s.Addr, MaxRetries: -1})
	defer sc.Close()
	return sc.Failover(ctx, SentinelMaster).Err()
}

// Process is the running Sentinel process.
func (s *Sentinel) Process() *Process { return s.proc }

// Close stops the Sentinel.
func (s *Sentinel) Close() { s.proc.Kill() }
