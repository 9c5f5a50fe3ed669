package chaos

import (
	"context"
	"fmt"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/connect-kinesis/connect-kinesis/internal/consumer"
	"github.com/connect-kinesis/connect-kinesis/internal/testenv"
	"github.com/connect-kinesis/connect-kinesis/plugins/checkpointer"
)

// The failover classes replicate the soak's Redis (a master and one
// replica) and promote the replica under load. They differ in the
// instances' min_replicas_to_ack, and in who promotes it: for the first
// two the soak itself, as Sentinel would, for the sentinel ones a real
// Sentinel the instances follow (soak_sentinel.go), for the cluster ones
// the replica of a Redis Cluster's master, taking its slots over
// (soak_cluster.go).
const (
	// ClassFailoverAcked runs the instances with min_replicas_to_ack: 1:
	// a commit is acknowledged only once the replica has it, so a
	// promotion loses no acknowledged checkpoint.
	ClassFailoverAcked = "failover-acked"
	// ClassFailoverUnacked runs them with min_replicas_to_ack: 0: a
	// promotion loses the commits the replica had not received, and
	// their records are read again.
	ClassFailoverUnacked = "failover-unacked"
	// ClassFailoverSentinelAcked is failover-acked with the instances
	// reaching Redis through a Sentinel (checkpoint.redis kind failover),
	// which promotes the replica.
	ClassFailoverSentinelAcked = "failover-sentinel-acked"
	// ClassFailoverSentinelUnacked is failover-unacked through a
	// Sentinel.
	ClassFailoverSentinelUnacked = "failover-sentinel-unacked"
	// ClassFailoverClusterAcked is failover-acked on a Redis Cluster of
	// three masters with one replica each (checkpoint.redis kind
	// cluster): the replica of the master holding a stream's keys takes
	// its slots over (CLUSTER FAILOVER TAKEOVER).
	ClassFailoverClusterAcked = "failover-cluster-acked"
	// ClassFailoverClusterUnacked is failover-unacked on a Redis Cluster.
	ClassFailoverClusterUnacked = "failover-cluster-unacked"
)

// promoter is who promotes the replica in a failover class, and so how
// the instances reach Redis.
type promoter string

const (
	// promoterSoak: the soak itself (REPLICAOF NO ONE), the instances
	// reaching the master through the front it points at the new one.
	promoterSoak promoter = ""
	// promoterSentinel: a real Sentinel, which the instances ask.
	promoterSentinel promoter = "sentinel"
	// promoterCluster: the replica of a Redis Cluster master, which the
	// instances' cluster client finds from the cluster's slot map.
	promoterCluster promoter = "cluster"
)

// failoverLagKind names the window of the acknowledged commits a promotion
// lost (failover-unacked or failover-sentinel-unacked), whose duplicates
// the verdict line counts as excused_dups_failover_lag.
const failoverLagKind = "failover-unacked, commits lost in the replication lag"

// failoverModes are the failover classes in the order failoverMode picks
// from, each with its min_replicas_to_ack and who promotes.
var failoverModes = []struct {
	class       string
	minReplicas int
	by          promoter
}{
	{ClassFailoverUnacked, 0, promoterSoak},
	{ClassFailoverAcked, 1, promoterSoak},
	{ClassFailoverSentinelUnacked, 0, promoterSentinel},
	{ClassFailoverSentinelAcked, 1, promoterSentinel},
	{ClassFailoverClusterUnacked, 0, promoterCluster},
	{ClassFailoverClusterAcked, 1, promoterCluster},
}

// failoverMode is the failover class that runs among those on: the
// instances' min_replicas_to_ack, who promotes (and so how they reach
// Redis), and whether any is on. With several on, the seed picks one
// (the report's first lines say which), since it is the instances'
// configuration and every instance must have the same for a promotion's
// bound to be one rule.
func failoverMode(on map[string]bool, seed uint64) (minReplicas int, by promoter, ok bool) {
	var idx []int
	for i, m := range failoverModes {
		if on[m.class] {
			idx = append(idx, i)
		}
	}
	if len(idx) == 0 {
		return 0, promoterSoak, false
	}
	m := failoverModes[idx[seed%uint64(len(idx))]]
	return m.minReplicas, m.by, true
}

// failoverClass names the class that runs, from min_replicas_to_ack and
// who promotes.
func failoverClass(minReplicas int, by promoter) string {
	for _, m := range failoverModes {
		if m.minReplicas == min(minReplicas, 1) && m.by == by {
			return m.class
		}
	}
	return ""
}

// isFailoverClass says whether c is one of the failover classes.
func isFailoverClass(c string) bool {
	for _, m := range failoverModes {
		if m.class == c {
			return true
		}
	}
	return false
}

// replicaArgs makes a server a replica of the master behind link.
func replicaArgs(link string) []string {
	host, port, _ := strings.Cut(link, ":")
	return []string{"--replicaof", host, port}
}

// setUpFailover starts the replica, which replicates through a proxy the
// fault holds (the replication lag) and cuts (the master's death), and
// the front every client reaches the master through: the instances (their
// URL names the front, or their redis-cut proxy which forwards to it) and
// the soak's own client. A promotion points the front at the new master,
// as a Sentinel-aware client would follow it.
func (s *soak) setUpFailover(ctx context.Context) error {
	var err error
	if s.replLink, err = testenv.StartTCPProxy(s.red.Addr); err != nil {
		return err
	}
	if s.replica, err = testenv.StartRedis(ctx, testenv.RedisOptions{AppendOnly: true, ShippedACL: true, Args: replicaArgs(s.replLink.Addr)}); err != nil {
		return fmt.Errorf("starting the replica: %w", err)
	}
	if err := waitReplicaLinked(ctx, s.replica); err != nil {
		return err
	}
	if s.promoter == promoterSentinel {
		return s.setUpSentinel(ctx)
	}
	if s.redisFront, err = testenv.StartTCPProxy(s.red.Addr); err != nil {
		return err
	}
	_ = s.rc.Close()
	s.rc = redis.NewClient(&redis.Options{Addr: s.redisFront.Addr, MaxRetries: -1, DialTimeout: time.Second})
	fmt.Fprintf(s.sc.Out, "soak: %s: Redis replicated (master and one replica), min_replicas_to_ack: %d\n", failoverClass(s.minReplicas, s.promoter), s.minReplicas)
	return nil
}

// waitReplicaLinked waits until r's link to its master is up.
func waitReplicaLinked(ctx context.Context, r *testenv.Redis) error {
	c := r.Client()
	defer c.Close()
	deadline := time.Now().Add(15 * time.Second)
	for {
		info, err := c.Info(ctx, "replication").Result()
		if err == nil && strings.Contains(info, "master_link_status:up") && !strings.Contains(info, "master_sync_in_progress:1") {
			return nil
		}
		if time.Now().After(deadline) || ctx.Err() != nil {
			return fmt.Errorf("replica %s did not sync in 15s: %v", r.Addr, err)
		}
		sleepCtx(ctx, 100*time.Millisecond)
	}
}

// closeFailover stops the replica and the proxies.
func (s *soak) closeFailover() {
	s.closeSentinel()
	s.closeCluster()
	if s.redisFront != nil {
		s.redisFront.Close()
	}
	if s.replLink != nil {
		s.replLink.Cut()
		s.replLink.Close()
	}
	if s.replica != nil {
		_ = s.replica.Resume()
		if s.cfg.Dir != "" && s.replica.Process() != nil {
			s.keepOutput("redis-replica.log", s.replica.Process())
		}
		s.replica.Close()
	}
}

// replOffset reads master_repl_offset from INFO replication: how many
// bytes of the replication stream the server has (a master: written; a
// replica: received).
func replOffset(ctx context.Context, c *redis.Client) (int64, error) {
	info, err := c.Info(ctx, "replication").Result()
	if err != nil {
		return 0, err
	}
	for _, line := range strings.Split(info, "\n") {
		if v, ok := strings.CutPrefix(strings.TrimSpace(line), "master_repl_offset:"); ok {
			return strconv.ParseInt(v, 10, 64)
		}
	}
	return 0, fmt.Errorf("no master_repl_offset in INFO replication")
}

// checkpointsOn reads the checkpoints of streams on one server (not
// through the front), as "label/shard".
func (s *soak) checkpointsOn(ctx context.Context, c *redis.Client, streams []*soakStream) (map[string]consumer.Position, error) {
	ck := checkpointer.DefaultConfig()
	ck.Group = group
	ck.LeasePeriod = s.plan.LeasePeriod
	base := checkpointer.NewFromClient(c, ck, nil, nil)
	out := map[string]consumer.Position{}
	for _, st := range streams {
		cctx, cancel := context.WithTimeout(ctx, 2*time.Second)
		cps, err := base.Stream(st.store.StreamID()).Checkpoints(cctx)
		cancel()
		if err != nil {
			return nil, fmt.Errorf("reading the checkpoints of %s: %w", st.label, err)
		}
		for shard, p := range cps {
			out[st.label+"/"+shard] = p
		}
	}
	return out, nil
}

// failover promotes the replica under load: replication to it is held for
// e.dur (the lag), then every client's connection is cut and new ones
// held, the master's checkpoints are read (nobody writes any more), the
// master is SIGKILLed with what the replica had not received, the replica
// is promoted (REPLICAOF NO ONE), and the clients reach it through the
// front. The old master comes back as the new one's replica.
func (s *soak) failover(ctx context.Context, e soakEvent) error {
	switch s.promoter {
	case promoterSentinel:
		return s.sentinelFailover(ctx, e)
	case promoterCluster:
		return s.clusterFailover(ctx, e)
	}
	s.redisMu.Lock()
	defer s.redisMu.Unlock()
	s.faultBegin("")
	defer s.faultEnd("")
	held := s.withholdBegin(e.class, "")
	defer s.withholdEnd(held)
	from := time.Now()
	master, replica := s.red, s.replica
	mc, rc := master.Client(), replica.Client()
	defer mc.Close()
	defer rc.Close()
	class := failoverClass(s.minReplicas, s.promoter)
	// A replica still resyncing after a restart or a wipe of its master
	// holds the old history, not a lagging copy of this one: promoting
	// it would test a stale replica, and the two offsets would not
	// compare (seed 1, every class: -523,410 bytes "lacked" after a
	// redis-empty).
	if err := waitReplicaLinked(ctx, replica); err != nil {
		return err
	}
	s.note("%s: replication held %v under load (min_replicas_to_ack: %d), then the master SIGKILLed and the replica promoted", class, e.dur.Round(100*time.Millisecond), s.minReplicas)
	s.replLink.Hold()
	sleepCtx(ctx, e.dur)
	s.redisFront.Hold()
	s.redisFront.Cut()
	killed := time.Now()
	lost, err := s.checkpointsOn(ctx, mc, s.liveStreams())
	if err != nil {
		return fmt.Errorf("reading the master before the promotion: %w", err)
	}
	masterOff, err := replOffset(ctx, mc)
	if err != nil {
		return fmt.Errorf("reading the master's replication offset: %w", err)
	}
	master.Kill()
	s.replLink.Cut()
	s.replLink.Close()
	replicaOff, err := replOffset(ctx, rc)
	if err != nil {
		return fmt.Errorf("reading the replica's replication offset: %w", err)
	}
	if err := rc.Do(ctx, "REPLICAOF", "NO", "ONE").Err(); err != nil {
		return fmt.Errorf("promoting the replica: %w", err)
	}
	promoted, err := s.checkpointsOn(ctx, rc, s.liveStreams())
	if err != nil {
		return fmt.Errorf("reading the promoted replica: %w", err)
	}
	if err := s.tradePlaces(master, replica); err != nil {
		return err
	}
	// The promotion forgot the lag's writes (checkpoints, leases, marks):
	// the regression check starts afresh, and the fencing check sees no
	// lease across it, as after a wipe. Marked before any client reaches
	// the new master, so that no read of it is compared with the old one's.
	s.setWiped()
	s.redisFront.Retarget(replica.Addr)
	s.redisFront.Cut()
	s.redisFront.Release()
	back := time.Now()
	regressed := lostCommits(lost, promoted)
	s.note("%s: promoted in %v; the replica lacked %d bytes of the replication stream; %d shards' checkpoints went back %v",
		class, back.Sub(from).Round(100*time.Millisecond), masterOff-replicaOff, len(regressed), regressed)
	ws := failoverWindows(class, s.minReplicas, s.plan, s.start, from, killed, back, lost, promoted)
	s.mu.Lock()
	s.windows = append(s.windows, ws...)
	s.mu.Unlock()
	if err := master.Start(ctx); err != nil {
		return fmt.Errorf("starting the old master as a replica: %w", err)
	}
	if err := waitReplicaLinked(ctx, master); err != nil {
		return err
	}
	s.note("%s: the old master is back as a replica", class)
	return nil
}

// tradePlaces makes the promoted replica the soak's master and the old
// master its replica, which replicates through a new link proxy: the
// promoted server stays a master when a later fault restarts it, and the
// old one restarts as its replica.
func (s *soak) tradePlaces(master, replica *testenv.Redis) error {
	link, err := testenv.StartTCPProxy(replica.Addr)
	if err != nil {
		return err
	}
	replica.Opts.Args = nil
	master.Opts.Args = replicaArgs(link.Addr)
	s.red, s.replica, s.replLink = replica, master, link
	return nil
}

// lostCommits lists the shards whose checkpoint on the promoted replica
// (promoted) is behind the master's last (lost), or missing.
func lostCommits(lost, promoted map[string]consumer.Position) []string {
	var out []string
	for id, p := range lost {
		if q, ok := promoted[id]; !ok || positionBefore(q, p) {
			out = append(out, id)
		}
	}
	sort.Strings(out)
	return out
}

// failoverWindows are a promotion's windows. Leases lapse across it, as
// across a restart that keeps the data, so every record past the last
// checkpoint may come once more: the kill-style bound, over every shard.
// Which checkpoint is the last depends on min_replicas_to_ack:
//
//   - on (1): an acknowledged commit is on the replica, so the promoted
//     replica's checkpoints are the last acknowledged ones, and the
//     bound is every record past them (a commit the master had but the
//     replica did not was never acknowledged, so its records are within
//     it). A record at or before them again is a breach.
//   - off (0): a commit is acknowledged once the master has it, so the
//     master's last checkpoints bound the ordinary duplicates, and the
//     records between the replica's checkpoints and the master's (the
//     acknowledged commits the lag lost) get a window of their own,
//     failoverLagKind: its bound is those records, each once, and its
//     duplicates are a named excuse on the verdict line.
//
// A mark written in the lag is lost too, so a record first delivered from
// just before the promotion began (2 commit periods, the replication the
// hold cut short) to a lease after it may come again unmarked: a window
// of its own that allows no duplicate (the others bound them). A record
// delivered before that had its mark on the replica, and one delivered
// again without it breaks the mark's promise.
//
// The promotion strikes (Window.At) when the instances lose the master
// (killed), not when the replication hold began (from): until then they
// read and write the master as ever, and a hand-off meanwhile is no
// duplicate of the promotion's.
func failoverWindows(class string, minReplicas int, p Plan, start, from, killed, back time.Time, lost, promoted map[string]consumer.Position) []Window {
	last := promoted
	if minReplicas == 0 {
		last = lost
	}
	w := Window{What: class + " promotion", Kind: class, From: start, To: back.Add(p.LeasePeriod), At: killed, Since: last}
	marks := Window{What: class + " promotion's marks written in the lag", Kind: class + ", marks written in the lag",
		From: from.Add(-2 * p.CommitPeriod), To: back.Add(p.LeasePeriod), At: from, Since: promoted, NoDups: true, Unmarked: true, After: from}
	ws := []Window{w, marks}
	if minReplicas > 0 {
		return ws
	}
	regressed := lostCommits(lost, promoted)
	if len(regressed) == 0 {
		return ws
	}
	lag := Window{What: class + " promotion's lost commits", Kind: failoverLagKind, From: start, To: back, At: killed,
		Shards: map[string]bool{}, Since: map[string]consumer.Position{}, Until: map[string]consumer.Position{}}
	for _, id := range regressed {
		lag.Shards[id] = true
		lag.Until[id] = lost[id]
		if q, ok := promoted[id]; ok {
			lag.Since[id] = q
		}
	}
	return append(ws, lag)
}
