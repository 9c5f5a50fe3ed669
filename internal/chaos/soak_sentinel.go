package chaos

import (
	"context"
	"errors"
	"fmt"
	"os"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/connect-kinesis/connect-kinesis/internal/testenv"
)

// The failover-sentinel classes run the promotion of the failover classes
// through a real Sentinel: the instances are configured with it
// (checkpoint.redis kind failover), so they find the master, and follow
// its promotion, as the product does in production; no proxy stands
// between them and the master. The replica still replicates through the
// link proxy, which holds the lag as for the other failover classes.

// sentinelDownAfter is the soak's Sentinel's down-after-milliseconds:
// longer than any outage of the master the other Redis classes make (a
// pause or an empty restart of at most two leases), so that the Sentinel
// never promotes on its own; the soak asks it to (SENTINEL FAILOVER)
// once the master is dead, and the promotion is the Sentinel's.
const sentinelDownAfter = time.Minute

// sentinelFailoverTimeout is its failover-timeout: a replica replicating
// from the link proxy rather than the master's own address is left so
// (the Sentinel would point it at the master after this long,
// +fix-slave-config, and the next promotion's lag could not be held).
const sentinelFailoverTimeout = 24 * time.Hour

// sentinelPromotionBound is how long the Sentinel has to name the replica
// as the master after the soak asked it to: past a TILT (a Sentinel whose
// event loop stalled over 2 s, as on a loaded CI machine, does nothing
// for 30 s), with room to ask again after it.
const sentinelPromotionBound = 75 * time.Second

// setUpSentinel starts the Sentinel monitoring the master, and points the
// soak's own client at it.
func (s *soak) setUpSentinel(ctx context.Context) error {
	dir, err := os.MkdirTemp("", "connect-kinesis-sentinel-")
	if err != nil {
		return err
	}
	s.sentinelDir = dir
	s.sentinel, err = testenv.StartSentinel(ctx, s.red, dir, testenv.SentinelOptions{DownAfter: sentinelDownAfter, FailoverTimeout: sentinelFailoverTimeout})
	if s.sentinel != nil && s.runner.cfg.Started != nil {
		// The Sentinel is a process of the run like the instances, so a
		// caller checking that none outlives the run sees it too.
		s.runner.cfg.Started(s.sentinel.Process().PID())
	}
	if err != nil {
		return fmt.Errorf("starting the Sentinel: %w", err)
	}
	if err := waitSentinelSeesReplica(ctx, s.sentinel, s.replica.Addr); err != nil {
		return err
	}
	_ = s.rc.Close()
	s.rc = redis.NewFailoverClient(&redis.FailoverOptions{MasterName: testenv.SentinelMaster, SentinelAddrs: []string{s.sentinel.Addr},
		MaxRetries: -1, DialTimeout: time.Second})
	fmt.Fprintf(s.sc.Out, "soak: %s: Redis replicated (master and one replica) under a Sentinel, instances with kind failover, min_replicas_to_ack: %d\n",
		failoverClass(s.minReplicas, true), s.minReplicas)
	return nil
}

// waitSentinelSeesReplica waits until the Sentinel lists replica among its
// master's replicas (it learns them from the master's INFO), so that it
// has one to promote.
func waitSentinelSeesReplica(ctx context.Context, sen *testenv.Sentinel, replica string) error {
	sc := redis.NewSentinelClient(&redis.Options{Addr: sen.Addr, MaxRetries: -1})
	defer sc.Close()
	deadline := time.Now().Add(30 * time.Second)
	for {
		reps, err := sc.Replicas(ctx, testenv.SentinelMaster).Result()
		for _, r := range reps {
			if r["ip"]+":"+r["port"] == replica && !strings.Contains(r["flags"], "down") && !strings.Contains(r["flags"], "disconnected") {
				return nil
			}
		}
		if time.Now().After(deadline) || ctx.Err() != nil {
			return fmt.Errorf("the Sentinel did not list replica %s in 30s: %v (%v)", replica, reps, err)
		}
		sleepCtx(ctx, 200*time.Millisecond)
	}
}

// closeSentinel stops the Sentinel, keeping its log.
func (s *soak) closeSentinel() {
	if s.sentinel == nil {
		return
	}
	s.sentinel.Close()
	if s.cfg.Dir != "" {
		s.keepOutput("redis-sentinel.log", s.sentinel.Process())
	}
	s.sentinel = nil
	_ = os.RemoveAll(s.sentinelDir)
}

// sentinelFailover is failover through the Sentinel: replication to the
// replica is held for e.dur under load (the lag), the master's
// checkpoints are read and it is SIGKILLed with what the replica had not
// received (the instances write to it until then, as to any master that
// dies: with min_replicas_to_ack 0, a commit between the reading and the
// kill is lost too, and its records are within the promotion's window,
// past the master's checkpoints read, not the lag's), the replica's checkpoints are read (nobody can write to a
// replica, so they are those it will have as the master), and the
// Sentinel is asked to promote it. The instances find the new master
// through the Sentinel, as go-redis does. The old master comes back as
// the new one's replica through a new link proxy. The windows are
// failover's (failoverWindows), from the same readings.
func (s *soak) sentinelFailover(ctx context.Context, e soakEvent) error {
	s.redisMu.Lock()
	defer s.redisMu.Unlock()
	s.faultBegin("")
	defer s.faultEnd("")
	held := s.withholdBegin(e.class, "")
	defer s.withholdEnd(held)
	master, replica := s.red, s.replica
	mc, rc := master.Client(), replica.Client()
	defer mc.Close()
	defer rc.Close()
	class := failoverClass(s.minReplicas, true)
	if err := waitReplicaLinked(ctx, replica); err != nil {
		return err
	}
	if err := waitSentinelSeesReplica(ctx, s.sentinel, replica.Addr); err != nil {
		return err
	}
	from := time.Now()
	s.note("%s: replication held %v under load (min_replicas_to_ack: %d), then the master SIGKILLed and the Sentinel asked to promote the replica", class, e.dur.Round(100*time.Millisecond), s.minReplicas)
	s.replLink.Hold()
	sleepCtx(ctx, e.dur)
	lost, err := s.checkpointsOn(ctx, mc)
	if err != nil {
		return fmt.Errorf("reading the master before the promotion: %w", err)
	}
	masterOff, err := replOffset(ctx, mc)
	if err != nil {
		return fmt.Errorf("reading the master's replication offset: %w", err)
	}
	master.Kill()
	killed := time.Now()
	s.replLink.Cut()
	s.replLink.Close()
	replicaOff, err := replOffset(ctx, rc)
	if err != nil {
		return fmt.Errorf("reading the replica's replication offset: %w", err)
	}
	promoted, err := s.checkpointsOn(ctx, rc)
	if err != nil {
		return fmt.Errorf("reading the replica before the promotion: %w", err)
	}
	// The promotion forgets the lag's writes: the regression check starts
	// afresh, and the fencing check sees no lease across it, as after a
	// wipe. Marked before the Sentinel promotes the replica, the first
	// moment a client can write to it.
	s.setWiped()
	if err := promoteBySentinel(ctx, s.sentinel, replica.Addr); err != nil {
		return fmt.Errorf("%s: %w", class, err)
	}
	back := time.Now()
	link, err := testenv.StartTCPProxy(replica.Addr)
	if err != nil {
		return err
	}
	// The promoted server stays a master when a later fault restarts it;
	// the old one restarts as its replica, through the link.
	replica.Opts.Args = nil
	master.Opts.Args = replicaArgs(link.Addr)
	s.red, s.replica, s.replLink = replica, master, link
	regressed := lostCommits(lost, promoted)
	s.note("%s: promoted by the Sentinel in %v (%v after the master died); the replica lacked %d bytes of the replication stream; %d shards' checkpoints went back %v",
		class, back.Sub(from).Round(100*time.Millisecond), back.Sub(killed).Round(100*time.Millisecond), masterOff-replicaOff, len(regressed), regressed)
	ws := failoverWindows(class, s.minReplicas, s.plan, s.start, from, back, lost, promoted)
	s.mu.Lock()
	s.windows = append(s.windows, ws...)
	s.mu.Unlock()
	if n, at := waitInstancesOn(ctx, rc); n > 0 {
		s.note("%s: the instances reached the new master %v after the promotion (%d connections)", class, at.Sub(back).Round(100*time.Millisecond), n)
	} else {
		s.note("%s: no instance reached the new master within %v", class, sentinelPromotionBound)
	}
	if err := master.Start(ctx); err != nil {
		return fmt.Errorf("starting the old master as a replica: %w", err)
	}
	if err := waitReplicaLinked(ctx, master); err != nil {
		return err
	}
	s.note("%s: the old master is back as a replica", class)
	return nil
}

// promoteBySentinel asks the Sentinel to fail its master over until it
// names replica as the master. A failover the Sentinel already runs
// (INPROG), or a replica it does not yet judge fit (NOGOODSLAVE, e.g. its
// last INFO is too old), is asked again.
func promoteBySentinel(ctx context.Context, sen *testenv.Sentinel, replica string) error {
	deadline := time.Now().Add(sentinelPromotionBound)
	var last error
	asked := false
	for {
		addr, err := sen.MasterAddr(ctx)
		if err == nil && addr == replica {
			return nil
		}
		if err != nil {
			last = err
		}
		if time.Now().After(deadline) || ctx.Err() != nil {
			return fmt.Errorf("the Sentinel did not name replica %s the master within %v (it names %s; asked: %v): %w", replica, sentinelPromotionBound, addr, asked, errors.Join(last, ctx.Err()))
		}
		if err := sen.Failover(ctx); err != nil {
			last = err
		} else {
			asked = true
		}
		sleepCtx(ctx, 200*time.Millisecond)
	}
}

// waitInstancesOn waits until the server c talks to has connections of the
// instances' user (they found it through the Sentinel), at most
// sentinelPromotionBound, and says how many and when; 0 if none came.
func waitInstancesOn(ctx context.Context, c *redis.Client) (int, time.Time) {
	deadline := time.Now().Add(sentinelPromotionBound)
	for {
		list, err := c.ClientList(ctx).Result()
		if err == nil {
			if n := strings.Count(list, " user="+testenv.ACLInput+" "); n > 0 {
				return n, time.Now()
			}
		}
		if time.Now().After(deadline) || ctx.Err() != nil {
			return 0, time.Time{}
		}
		sleepCtx(ctx, 50*time.Millisecond)
	}
}
