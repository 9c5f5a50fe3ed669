package chaos

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/redis/go-redis/v9"

	"github.com/connect-kinesis/connect-kinesis/internal/kinesisx"
	"github.com/connect-kinesis/connect-kinesis/internal/testenv"
)

// The failover-cluster classes run the promotion of the failover classes
// on a real Redis Cluster of three masters with one replica each, on
// loopback: the instances are configured with it (checkpoint.redis kind
// cluster), so they find each slot's master from the cluster's slot map,
// and follow a promotion, as the product does in production; no proxy
// stands between them and any node. The master a promotion fails is the
// one holding the first stream's keys (each stream's keys share one hash
// tag, so one slot); the other streams' keys may be on it too, or on
// masters the promotion leaves alone.
//
// Replication is held without a proxy (a Cluster replica replicates from
// the address its master announces, which the instances use too): the
// master's default user, which replicas use, loses PSYNC and SYNC and the
// replica's connection is closed, so the replica keeps retrying and gets
// nothing more, and a WAIT for it times out, as behind a held link. The
// master is SIGKILLed next, so the change dies with it.

// clusterPromotionBound is how long the replica has to show itself the
// master in CLUSTER NODES after the soak sent it CLUSTER FAILOVER
// TAKEOVER (a takeover needs no other node's vote).
const clusterPromotionBound = 30 * time.Second

// clusterRefuses says which classes on cannot run with a failover-cluster
// class: those that act on the one Redis server (its process, its data,
// a proxy in front of it), which a Cluster does not have.
func clusterRefuses(on map[string]bool) error {
	var refused []string
	for _, c := range []string{ClassRedisRestart, ClassRedisEmpty, ClassRedisFlush, ClassRedisPause, ClassRedisStall, ClassRedisCut} {
		if on[c] {
			refused = append(refused, c)
		}
	}
	if len(refused) > 0 {
		return fmt.Errorf("the classes %s act on one Redis server, which a Cluster does not have; run them without it", strings.Join(refused, ", "))
	}
	return nil
}

// setUpCluster starts the Redis Cluster (AOF on, the shipped ACL file on
// every node), reports its nodes' PIDs, and points the soak's own client
// and the instances' URL at it.
func (s *soak) setUpCluster(ctx context.Context) error {
	c, err := testenv.StartRedisClusterWithReplicas(ctx, testenv.ClusterOptions{RedisOptions: testenv.RedisOptions{AppendOnly: true, ShippedACL: true}})
	if err != nil {
		return fmt.Errorf("starting the Redis Cluster: %w", err)
	}
	s.cluster = c
	for _, n := range c.Nodes {
		s.reportStarted(n.Process())
	}
	s.rc = redis.NewClusterClient(&redis.ClusterOptions{Addrs: c.Addrs(), DialTimeout: time.Second})
	s.redisInputURL = c.URLAs(testenv.ACLInput)
	fmt.Fprintf(s.sc.Out, "soak: %s: Redis Cluster (three masters, one replica each), instances with kind cluster, min_replicas_to_ack: %d\n",
		failoverClass(s.minReplicas, promoterCluster), s.minReplicas)
	return nil
}

// reportStarted gives a server process of the run to the caller's
// Started, so that a caller checking that none outlives the run sees it.
func (s *soak) reportStarted(p *testenv.Process) {
	if p != nil && s.runner.cfg.Started != nil {
		s.runner.cfg.Started(p.PID())
	}
}

// closeCluster stops every node, keeping their logs.
func (s *soak) closeCluster() {
	if s.cluster == nil {
		return
	}
	for _, n := range s.cluster.Nodes {
		if s.cfg.Dir != "" && n.Process() != nil {
			s.keepOutput(fmt.Sprintf("redis-cluster-%d.log", n.Port), n.Process())
		}
	}
	s.cluster.Close()
	s.cluster = nil
}

// clusterFailover is failover on the Cluster (promoteUnderLoad): the
// master holding the first live stream's slot and its replica are found
// from CLUSTER KEYSLOT and CLUSTER NODES, replication is held at the
// master (holdReplicas), the replica takes the slots over (CLUSTER
// FAILOVER TAKEOVER, since its master is dead), and the instances find it
// from the slot map. The old master, restarted with its data and its
// nodes.conf, learns that the slots moved and comes back as the new
// master's replica. The windows cover the shards of the streams whose
// keys the master held.
func (s *soak) clusterFailover(ctx context.Context, e soakEvent) error {
	s.redisMu.Lock()
	defer s.redisMu.Unlock()
	live := s.liveStreams()
	master, replica, err := s.clusterPair(ctx, live[0].store.Keys().Checkpoints)
	if err != nil {
		return err
	}
	var streams []*soakStream
	for _, st := range live {
		owner, _, err := s.clusterPair(ctx, st.store.Keys().Checkpoints)
		if err != nil {
			return err
		}
		if owner == master {
			streams = append(streams, st)
		}
	}
	mc, rc := master.Client(), readOnlyClient(replica)
	defer mc.Close()
	defer rc.Close()
	labels := make([]string, len(streams))
	for i, st := range streams {
		labels[i] = st.label
	}
	s.note("%s: the master %s holds the keys of %s; its replica is %s", failoverClass(s.minReplicas, s.promoter), master.Addr, strings.Join(labels, ", "), replica.Addr)
	return s.promoteUnderLoad(ctx, e, promotion{
		by: "a Cluster failover (CLUSTER FAILOVER TAKEOVER)", master: master, replica: replica, mc: mc, rc: rc,
		streams: streams, shards: s.shardsOf(ctx, streams),
		hold:      func(ctx context.Context) error { return holdReplicas(ctx, mc) },
		promote:   func(ctx context.Context) error { return takeOver(ctx, rc) },
		restarted: s.reportStarted,
	})
}

// readOnlyClient is a client of a Cluster replica whose connections are
// READONLY: it answers reads of its master's slots instead of redirecting
// them.
func readOnlyClient(r *testenv.Redis) *redis.Client {
	c := r.Client()
	o := c.Options()
	_ = c.Close()
	o.OnConnect = func(ctx context.Context, cn *redis.Conn) error { return cn.ReadOnly(ctx).Err() }
	return redis.NewClient(o)
}

// holdReplicas stops replication from the master mc talks to: its
// default user, which replicas authenticate as, may no longer PSYNC or
// SYNC, and its replicas' connections are closed. The change is not
// saved, so the master's next start undoes it.
func holdReplicas(ctx context.Context, mc *redis.Client) error {
	if err := mc.Do(ctx, "ACL", "SETUSER", "default", "-psync", "-sync").Err(); err != nil {
		return err
	}
	return mc.Do(ctx, "CLIENT", "KILL", "TYPE", "replica").Err()
}

// takeOver sends CLUSTER FAILOVER TAKEOVER to the replica rc talks to
// until CLUSTER NODES on it shows it a master, at most
// clusterPromotionBound; it is sent again every 2 s meanwhile.
func takeOver(ctx context.Context, rc *redis.Client) error {
	deadline := time.Now().Add(clusterPromotionBound)
	var last error
	var sent time.Time
	for {
		nodes, err := rc.ClusterNodes(ctx).Result()
		if err == nil && myselfMaster(nodes) {
			return nil
		}
		if err != nil {
			last = err
		}
		if time.Now().After(deadline) || ctx.Err() != nil {
			return fmt.Errorf("replica %s was no master %v after CLUSTER FAILOVER TAKEOVER: %w", rc.Options().Addr, clusterPromotionBound, errors.Join(last, ctx.Err()))
		}
		if time.Since(sent) > 2*time.Second {
			if err := rc.Do(ctx, "CLUSTER", "FAILOVER", "TAKEOVER").Err(); err != nil {
				last = err
			}
			sent = time.Now()
		}
		sleepCtx(ctx, 100*time.Millisecond)
	}
}

// myselfMaster says whether CLUSTER NODES shows the node answering it as
// a master.
func myselfMaster(nodes string) bool {
	for _, line := range strings.Split(nodes, "\n") {
		f := strings.Fields(line)
		if len(f) > 2 && strings.Contains(f[2], "myself") {
			return strings.Contains(f[2], "master")
		}
	}
	return false
}

// clusterNode is one line of CLUSTER NODES.
type clusterNode struct {
	id, master string
	port       int
	flags      []string
	slots      [][2]int
}

// parseClusterNodes reads CLUSTER NODES: each node's id, port, flags,
// master's id ("-" for a master) and slot ranges (a slot being moved,
// "[...]", is left out).
func parseClusterNodes(text string) []clusterNode {
	var out []clusterNode
	for _, line := range strings.Split(strings.TrimSpace(text), "\n") {
		f := strings.Fields(line)
		if len(f) < 8 {
			continue
		}
		hostPort, _, _ := strings.Cut(f[1], "@")
		_, p, _ := strings.Cut(hostPort, ":")
		port, _ := strconv.Atoi(p)
		n := clusterNode{id: f[0], port: port, flags: strings.Split(f[2], ","), master: f[3]}
		for _, r := range f[8:] {
			if strings.HasPrefix(r, "[") {
				continue
			}
			lo, hi, ok := strings.Cut(r, "-")
			if !ok {
				hi = lo
			}
			a, err1 := strconv.Atoi(lo)
			b, err2 := strconv.Atoi(hi)
			if err1 == nil && err2 == nil {
				n.slots = append(n.slots, [2]int{a, b})
			}
		}
		out = append(out, n)
	}
	return out
}

// has says whether n carries flag.
func (n clusterNode) has(flag string) bool {
	for _, f := range n.flags {
		if f == flag {
			return true
		}
	}
	return false
}

// slotOwner finds, in a CLUSTER NODES reading, the live master serving
// slot and a live replica of it, by port.
func slotOwner(nodes []clusterNode, slot int) (master, replica int, err error) {
	var id string
	for _, n := range nodes {
		if !n.has("master") || n.has("fail") {
			continue
		}
		for _, r := range n.slots {
			if slot >= r[0] && slot <= r[1] {
				id, master = n.id, n.port
			}
		}
	}
	if id == "" {
		return 0, 0, fmt.Errorf("no live master serves slot %d", slot)
	}
	for _, n := range nodes {
		if n.master == id && !n.has("fail") {
			return master, n.port, nil
		}
	}
	return 0, 0, fmt.Errorf("the master on port %d of slot %d has no live replica", master, slot)
}

// clusterPair finds the master serving key's slot and its replica among
// the Cluster's nodes, as the first node that answers sees them.
func (s *soak) clusterPair(ctx context.Context, key string) (master, replica *testenv.Redis, err error) {
	slot, err := s.rc.ClusterKeySlot(ctx, key).Result()
	if err != nil {
		return nil, nil, fmt.Errorf("CLUSTER KEYSLOT %s: %w", key, err)
	}
	var last error
	for _, n := range s.cluster.Nodes {
		c := n.Client()
		text, err := c.ClusterNodes(ctx).Result()
		_ = c.Close()
		if err != nil {
			last = err
			continue
		}
		mp, rp, err := slotOwner(parseClusterNodes(text), int(slot))
		if err != nil {
			last = err
			continue
		}
		for _, m := range s.cluster.Nodes {
			if m.Port == mp {
				master = m
			}
			if m.Port == rp {
				replica = m
			}
		}
		if master != nil && replica != nil {
			return master, replica, nil
		}
	}
	return nil, nil, fmt.Errorf("finding the master of slot %d: %w", slot, last)
}

// shardsOf lists the shards of streams, as deliveries name them; nil (every
// shard) if a listing fails, so that a window is never narrower than the
// promotion.
func (s *soak) shardsOf(ctx context.Context, streams []*soakStream) map[string]bool {
	out := map[string]bool{}
	for _, st := range streams {
		lctx, cancel := context.WithTimeout(ctx, 5*time.Second)
		shards, err := kinesisx.ListAllShards(lctx, s.kc, st.name)
		cancel()
		if err != nil {
			s.logf("soak: listing the shards of %s for the promotion's windows: %v", st.name, err)
			return nil
		}
		for _, sh := range shards {
			out[st.label+"/"+aws.ToString(sh.ShardId)] = true
		}
	}
	return out
}
