package chaos

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// killRandom SIGKILLs one live instance and restarts it RestartAfter later.
func (r *runner) killRandom(ctx context.Context) error {
	names := r.names()
	r.mu.Lock()
	name := names[r.rng.IntN(len(names))]
	in := r.instances[name]
	r.mu.Unlock()
	if in == nil {
		return nil
	}
	select {
	case <-in.done:
		return nil // already dead and about to be restarted
	default:
	}
	// The shards it owns, for the failover gap; Redis may be paused, so do
	// not wait for it long.
	var owned []string
	lctx, cancel := context.WithTimeout(ctx, 500*time.Millisecond)
	leases, err := r.store.Leases(lctx)
	cancel()
	if err == nil {
		pid := "-" + strconv.Itoa(in.cmd.Process.Pid) + "-"
		for shard, l := range leases {
			if !l.Expired && strings.Contains(l.Owner, pid) {
				owned = append(owned, shard)
			}
		}
	}
	now := time.Now()
	_ = in.cmd.Process.Signal(syscall.SIGKILL)
	<-in.done
	dead := time.Now()
	r.mu.Lock()
	r.kills = append(r.kills, Kill{Inst: in.name, At: now, Shards: owned})
	// What it delivered since its last commit (a commit period, plus a
	// batch in flight and a commit round trip) is delivered again. The slack
	// covers commits delayed by a starved CPU or a Redis outage.
	r.windows = append(r.windows, Window{What: "kill " + in.name, Kind: "kill", Inst: in.name, From: now.Add(-killWindow(r.plan)), To: dead})
	r.mu.Unlock()
	r.logf("chaos: killed %s (owned %v)", in.name, owned)
	select {
	case <-time.After(r.plan.RestartAfter):
	case <-ctx.Done():
		return ctx.Err()
	}
	return r.start(name)
}

// restartName names the Redis restart event in the log.
func (r *runner) restartName() string {
	if r.cfg.PausedHolder {
		return "redis restart, empty, under a paused holder"
	}
	if r.cfg.EmptyRedis {
		return "redis restart, empty"
	}
	return "redis restart"
}

func (r *runner) restartRedis(ctx context.Context) error {
	if r.cfg.PausedHolder {
		return r.restartUnderAPausedHolder(ctx)
	}
	if r.cfg.Standbys {
		if err := r.countStandbys(ctx); err != nil {
			return err
		}
	}
	now := time.Now()
	if r.cfg.EmptyRedis {
		// Down for twice the lease period, past every lease's local
		// deadline, before it comes back empty.
		r.red.Stop()
		select {
		case <-time.After(2 * r.plan.LeasePeriod):
		case <-ctx.Done():
		}
		if err := r.red.Start(ctx); err != nil {
			return err
		}
	} else if err := r.red.Restart(ctx); err != nil {
		return err
	}
	// A commit in flight when Redis stopped may be lost with the connection
	// (the AOF keeps every acknowledged write). Without the AOF, the
	// instances re-seed the positions they acked.
	r.mu.Lock()
	r.windows = append(r.windows, Window{What: "redis restart", From: now.Add(-2 * r.plan.CommitPeriod), To: time.Now().Add(r.plan.LeasePeriod)})
	r.mu.Unlock()
	return nil
}

// countStandbys notes how many live instances hold no lease, and fails the
// run if none does: the phase would not test what it says.
func (r *runner) countStandbys(ctx context.Context) error {
	leases, err := r.store.Leases(ctx)
	if err != nil {
		return fmt.Errorf("reading the leases before the restart: %w", err)
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	standbys := 0
	live := 0
	for _, in := range r.instances {
		select {
		case <-in.done:
			continue // killed, about to be restarted
		default:
		}
		live++
		pid := "-" + strconv.Itoa(in.cmd.Process.Pid) + "-"
		holds := false
		for _, l := range leases {
			holds = holds || (!l.Expired && strings.Contains(l.Owner, pid))
		}
		if !holds {
			standbys++
		}
	}
	r.standbys = standbys
	r.logf("chaos: %d of %d live instances hold no lease as Redis goes down", standbys, live)
	if standbys == 0 {
		return fmt.Errorf("every one of the %d live instances holds a lease: there is no standby to meet the empty store", live)
	}
	return nil
}

// stallFor and stallGap shape the stalls of the RedisStalls phase.
const (
	stallFor = 2 * time.Second
	stallGap = 3 * time.Second
)

// stallRedis freezes Redis three times for stallFor. Each stall gets a
// window: with a 3 s lease a 2 s stall can still let a lease run out by
// Redis' clock and be taken, which reads again what its reader had not
// committed.
func (r *runner) stallRedis(ctx context.Context) error {
	for i := range 3 {
		if i > 0 {
			select {
			case <-time.After(stallGap):
			case <-ctx.Done():
				return nil
			}
		}
		from := time.Now()
		if err := r.red.Pause(); err != nil {
			return err
		}
		select {
		case <-time.After(stallFor):
		case <-ctx.Done():
		}
		if err := r.red.Resume(); err != nil {
			return err
		}
		r.mu.Lock()
		r.windows = append(r.windows, Window{What: "redis stall", From: from.Add(-2 * r.plan.CommitPeriod), To: time.Now().Add(r.plan.LeasePeriod)})
		r.mu.Unlock()
	}
	return nil
}

func (r *runner) pauseRedis(ctx context.Context) error {
	from := time.Now()
	if err := r.red.Pause(); err != nil {
		return err
	}
	select {
	case <-time.After(r.plan.PauseFor):
	case <-ctx.Done():
	}
	if err := r.red.Resume(); err != nil {
		return err
	}
	// Leases expire during the pause: what was delivered but not committed
	// from the last commit before it until the readers stop is read again.
	r.mu.Lock()
	r.windows = append(r.windows, Window{What: "redis pause", From: from.Add(-2 * r.plan.CommitPeriod), To: time.Now().Add(r.plan.LeasePeriod)})
	r.mu.Unlock()
	return nil
}
