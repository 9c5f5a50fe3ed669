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
		failoverClass(s.minReplicas, promoterSentinel), s.minReplicas)
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

// sentinelFailover is failover through the Sentinel (promoteUnderLoad):
// replication is held at the link proxy, the Sentinel is asked to promote
// the replica, and the instances find the new master through it, as
// go-redis does. The old master comes back as the new one's replica
// through a new link proxy.
func (s *soak) sentinelFailover(ctx context.Context, e soakEvent) error {
	s.redisMu.Lock()
	defer s.redisMu.Unlock()
	master, replica := s.red, s.replica
	mc, rc := master.Client(), replica.Client()
	defer mc.Close()
	defer rc.Close()
	return s.promoteUnderLoad(ctx, e, promotion{
		by: "the Sentinel", master: master, replica: replica, mc: mc, rc: rc,
		ready: func(ctx context.Context) error { return waitSentinelSeesReplica(ctx, s.sentinel, replica.Addr) },
		hold: func(context.Context) error {
			s.replLink.Hold()
			return nil
		},
		dead: func() {
			s.replLink.Cut()
			s.replLink.Close()
		},
		promote:  func(ctx context.Context) error { return promoteBySentinel(ctx, s.sentinel, replica.Addr) },
		promoted: func() error { return s.tradePlaces(master, replica) },
	})
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
