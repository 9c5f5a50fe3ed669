package testenv

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"testing"
	"time"
)

// NewRedisClusterWithReplicas starts a Redis Cluster of three masters, each
// with one replica (six redis-server processes), for a test, and stops it
// when the test ends. Nodes lists the masters first as redis-cli assigns
// them; ReplicaOf finds a master's replica.
func NewRedisClusterWithReplicas(tb testing.TB) *RedisCluster {
	tb.Helper()
	c, err := StartRedisClusterWithReplicas(tb.Context())
	Require(tb, "starting a Redis Cluster with replicas", err)
	tb.Cleanup(c.Close)
	return c
}

// StartRedisClusterSeeds starts a Redis Cluster of three masters and three
// replicas on loopback and returns the six nodes' host:port, which any of
// them seeds a cluster client with, and the func that stops every node and
// removes their folders. Outside a test (a bench) it is the whole interface;
// a test that needs the nodes themselves uses NewRedisClusterWithReplicas.
func StartRedisClusterSeeds(ctx context.Context) (seeds []string, stop func(), err error) {
	c, err := StartRedisClusterWithReplicas(ctx)
	if err != nil {
		return nil, nil, err
	}
	return c.Addrs(), c.Close, nil
}

// ClusterOptions shape a cluster StartRedisClusterWithReplicas starts.
type ClusterOptions struct {
	// RedisOptions shape every node (ShippedACL, AppendOnly); cluster mode
	// is added to their Args.
	RedisOptions
	// NodeTimeout is cluster-node-timeout: how long a node may go
	// unanswered before the others count it failing and its replica is
	// promoted. Zero is 2 s, so that a test's failover is quick; a bench
	// that loads the machine wants Redis's default, 15 s, or a master
	// slowed by the load is failed over in the middle of the measurement.
	NodeTimeout time.Duration
}

// StartRedisClusterWithReplicas starts a Redis Cluster of three masters,
// each with one replica, and waits until every master sees its replica
// online. Close stops it.
func StartRedisClusterWithReplicas(ctx context.Context, opts ...ClusterOptions) (*RedisCluster, error) {
	var o ClusterOptions
	if len(opts) > 0 {
		o = opts[0]
	}
	if _, err := lookPath("redis-cli"); err != nil {
		return nil, err
	}
	timeout := 2 * time.Second
	if o.NodeTimeout > 0 {
		timeout = o.NodeTimeout
	}
	c := &RedisCluster{}
	for range 6 {
		no := o.RedisOptions
		no.Args = append([]string{"--cluster-enabled", "yes", "--cluster-config-file", "nodes.conf", "--cluster-node-timeout", strconv.FormatInt(timeout.Milliseconds(), 10)}, o.Args...)
		n, err := StartRedis(ctx, no)
		if err != nil {
			c.Close()
			return nil, err
		}
		c.Nodes = append(c.Nodes, n)
	}
	args := append([]string{"--cluster", "create"}, c.Addrs()...)
	args = append(args, "--cluster-replicas", "1", "--cluster-yes")
	out, err := runRedisCLI(ctx, args...)
	if err != nil {
		c.Close()
		return nil, fmt.Errorf("creating the cluster: %w: %s", err, out)
	}
	deadline := time.Now().Add(30 * time.Second)
	for _, n := range c.Nodes {
		cl := n.Client()
		for {
			info, err := cl.ClusterInfo(ctx).Result()
			repl, rerr := cl.Info(ctx, "replication").Result()
			// Every master sees its replica online, every replica its
			// master's link up.
			if err == nil && rerr == nil && strings.Contains(info, "cluster_state:ok") &&
				(strings.Contains(repl, "connected_slaves:1") || strings.Contains(repl, "master_link_status:up")) {
				break
			}
			if time.Now().After(deadline) {
				cl.Close()
				c.Close()
				return nil, fmt.Errorf("cluster with replicas not ready after 30s: %v %v %s %s", err, rerr, info, repl)
			}
			time.Sleep(100 * time.Millisecond)
		}
		cl.Close()
	}
	return c, nil
}

// ReplicaOf returns the node replicating the master at addr, read from the
// master's INFO replication.
func (c *RedisCluster) ReplicaOf(ctx context.Context, addr string) (*Redis, error) {
	for _, n := range c.Nodes {
		if n.Addr != addr {
			continue
		}
		cl := n.Client()
		defer cl.Close()
		info, err := cl.Info(ctx, "replication").Result()
		if err != nil {
			return nil, err
		}
		for _, line := range strings.Split(info, "\n") {
			if !strings.HasPrefix(line, "slave0:") {
				continue
			}
			for _, kv := range strings.Split(strings.TrimSpace(strings.TrimPrefix(line, "slave0:")), ",") {
				if p, ok := strings.CutPrefix(kv, "port="); ok {
					port, _ := strconv.Atoi(p)
					for _, r := range c.Nodes {
						if r.Port == port {
							return r, nil
						}
					}
				}
			}
		}
		return nil, fmt.Errorf("master %s has no replica: %s", addr, info)
	}
	return nil, fmt.Errorf("no node %s in the cluster", addr)
}
