package chaos

import (
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/connect-kinesis/connect-kinesis/internal/testenv"
)

// promotion is what one promotion by a real promoter (a Sentinel, or the
// replica of a Redis Cluster master taking its slots over) brings to the
// steps they share (promoteUnderLoad): the servers, how replication is
// held, and how the replica is promoted.
type promotion struct {
	// by names the promoter in the report ("the Sentinel").
	by string
	// master and replica are the servers; mc reads the master, rc the
	// replica (on a Cluster with READONLY, so it answers for its
	// master's slots).
	master, replica *testenv.Redis
	mc, rc          *redis.Client
	// streams are the streams whose keys the master holds, whose
	// checkpoints are read on both; nil is every live stream.
	streams []*soakStream
	// shards scope the promotion's windows to those streams' shards (as
	// deliveries name them); nil is every shard.
	shards map[string]bool
	// hold stops replication to the replica; promote makes it the
	// master. The others may be nil: ready waits until the promoter could
	// promote the replica; dead runs once the master is SIGKILLed;
	// promoted, once the replica is the master, readies the old master to
	// come back as its replica; restarted is given the old master's new
	// process.
	ready, hold, promote func(ctx context.Context) error
	dead                 func()
	promoted             func() error
	restarted            func(p *testenv.Process)
}

// promoteUnderLoad is the failover of the sentinel and cluster classes:
// replication to the replica is held for e.dur under load (the lag), the
// master's checkpoints are read and it is SIGKILLed with what the replica
// had not received (the instances write to it until then, as to any
// master that dies: with min_replicas_to_ack 0, a commit between the
// reading and the kill is lost too, and its records are within the
// promotion's window, past the master's checkpoints read, not the lag's),
// the replica's checkpoints are read (nobody can write to a replica, so
// they are those it will have as the master), and the promoter promotes
// it. The instances find the new master as their client does. The old
// master comes back as the new one's replica. The windows are failover's
// (failoverWindows), from the same readings.
func (s *soak) promoteUnderLoad(ctx context.Context, e soakEvent, p promotion) error {
	s.faultBegin("")
	defer s.faultEnd("")
	held := s.withholdBegin(e.class, "")
	defer s.withholdEnd(held)
	class := failoverClass(s.minReplicas, s.promoter)
	if err := waitReplicaLinked(ctx, p.replica); err != nil {
		return err
	}
	if p.ready != nil {
		if err := p.ready(ctx); err != nil {
			return err
		}
	}
	streams := p.streams
	if streams == nil {
		streams = s.liveStreams()
	}
	from := time.Now()
	s.note("%s: replication held %v under load (min_replicas_to_ack: %d), then the master SIGKILLed and the replica promoted by %s", class, e.dur.Round(100*time.Millisecond), s.minReplicas, p.by)
	if err := p.hold(ctx); err != nil {
		return fmt.Errorf("holding the replication: %w", err)
	}
	sleepCtx(ctx, e.dur)
	lost, err := s.checkpointsOn(ctx, p.mc, streams)
	if err != nil {
		return fmt.Errorf("reading the master before the promotion: %w", err)
	}
	masterOff, err := replOffset(ctx, p.mc)
	if err != nil {
		return fmt.Errorf("reading the master's replication offset: %w", err)
	}
	p.master.Kill()
	killed := time.Now()
	if p.dead != nil {
		p.dead()
	}
	replicaOff, err := replOffset(ctx, p.rc)
	if err != nil {
		return fmt.Errorf("reading the replica's replication offset: %w", err)
	}
	promoted, err := s.checkpointsOn(ctx, p.rc, streams)
	if err != nil {
		return fmt.Errorf("reading the replica before the promotion: %w", err)
	}
	// The promotion forgets the lag's writes: the regression check starts
	// afresh, and the fencing check sees no lease across it, as after a
	// wipe. Marked before the replica is promoted, the first moment a
	// client can write to it.
	s.setWiped()
	if err := p.promote(ctx); err != nil {
		return fmt.Errorf("%s: %w", class, err)
	}
	back := time.Now()
	if p.promoted != nil {
		if err := p.promoted(); err != nil {
			return err
		}
	}
	regressed := lostCommits(lost, promoted)
	s.note("%s: promoted by %s in %v (%v after the master died); the replica lacked %d bytes of the replication stream; %d shards' checkpoints went back %v",
		class, p.by, back.Sub(from).Round(100*time.Millisecond), back.Sub(killed).Round(100*time.Millisecond), masterOff-replicaOff, len(regressed), regressed)
	ws := failoverWindows(class, s.minReplicas, s.plan, s.start, from, killed, back, lost, promoted)
	for i := range ws {
		if ws[i].Shards == nil {
			ws[i].Shards = p.shards
		}
	}
	s.mu.Lock()
	s.windows = append(s.windows, ws...)
	s.mu.Unlock()
	if n, at := waitInstancesOn(ctx, p.rc, back); n > 0 {
		s.note("%s: the instances reached the new master within %v after the promotion (%d connections running scripts on it)", class, at.Sub(back).Round(100*time.Millisecond), n)
	} else {
		s.note("%s: no instance reached the new master within %v", class, sentinelPromotionBound)
	}
	if err := p.master.Start(ctx); err != nil {
		return fmt.Errorf("starting the old master as a replica: %w", err)
	}
	if p.restarted != nil {
		p.restarted(p.master.Process())
	}
	if err := waitReplicaLinked(ctx, p.master); err != nil {
		return err
	}
	s.note("%s: the old master is back as a replica", class)
	return nil
}

// waitInstancesOn waits until the server c talks to runs scripts of the
// instances' user that came after since (their renewals and commits: they
// found it as the new master), at most sentinelPromotionBound, and says
// how many connections did and when; 0 if none came. A connection's last
// command is all CLIENT LIST tells, and it stays on a connection left
// open from when the server was a master before, so only one idle under a
// second counts, and only from a second after since on. A script a
// replica refused (MOVED) would count too, but a client sends none to a
// node it does not take for the master.
func waitInstancesOn(ctx context.Context, c *redis.Client, since time.Time) (int, time.Time) {
	deadline := time.Now().Add(sentinelPromotionBound)
	for {
		list, err := c.ClientList(ctx).Result()
		if err == nil && time.Since(since) >= time.Second {
			n := 0
			for _, line := range strings.Split(list, "\n") {
				line = " " + strings.TrimSpace(line) + " "
				if strings.Contains(line, " user="+testenv.ACLInput+" ") && strings.Contains(line, " idle=0 ") &&
					(strings.Contains(line, " cmd=evalsha ") || strings.Contains(line, " cmd=eval ")) {
					n++
				}
			}
			if n > 0 {
				return n, time.Now()
			}
		}
		if time.Now().After(deadline) || ctx.Err() != nil {
			return 0, time.Time{}
		}
		sleepCtx(ctx, 50*time.Millisecond)
	}
}
