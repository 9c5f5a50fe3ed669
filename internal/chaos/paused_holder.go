package chaos

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// pausedHolderWake is how long after Redis came back empty the paused
// holder of the PausedHolder phase wakes, as from a long GC or VM pause.
const pausedHolderWake = 3 * time.Second

// restartUnderAPausedHolder is the Redis restart of the PausedHolder
// phase: the instance holding the most shards is frozen (SIGSTOP), Redis
// restarts empty, a newcomer instance starts the moment it is back, and the
// holder wakes pausedHolderWake later. The newcomer must take nothing the
// holder held before the holder re-seeded it (the store restarted, so the
// newcomer waits until Redis has been up a lease period), and the holder
// goes on from its own position: nothing lost, nothing out of order.
func (r *runner) restartUnderAPausedHolder(ctx context.Context) error {
	leases, err := r.store.Leases(ctx)
	if err != nil {
		return fmt.Errorf("reading the leases before the pause: %w", err)
	}
	r.mu.Lock()
	var holder *incarnation
	most := 0
	for _, in := range r.instances {
		select {
		case <-in.done:
			continue
		default:
		}
		pid, n := "-"+strconv.Itoa(in.cmd.Process.Pid)+"-", 0
		for _, l := range leases {
			if !l.Expired && strings.Contains(l.Owner, pid) {
				n++
			}
		}
		if n > most {
			holder, most = in, n
		}
	}
	r.mu.Unlock()
	if holder == nil {
		return fmt.Errorf("no live instance holds a lease: there is no holder to pause")
	}
	now := time.Now()
	if err := holder.cmd.Process.Signal(syscall.SIGSTOP); err != nil {
		return fmt.Errorf("pausing %s: %w", holder.name, err)
	}
	// Woken on every path, so that the run can stop it.
	defer func() { _ = holder.cmd.Process.Signal(syscall.SIGCONT) }()
	r.logf("chaos: paused %s (holds %d shards) while Redis restarts empty", holder.name, most)
	r.red.Stop()
	if err := r.red.Start(ctx); err != nil {
		return err
	}
	if err := r.start("n"); err != nil {
		return fmt.Errorf("starting the newcomer: %w", err)
	}
	select {
	case <-time.After(pausedHolderWake):
	case <-ctx.Done():
		return ctx.Err()
	}
	if err := holder.cmd.Process.Signal(syscall.SIGCONT); err != nil {
		return fmt.Errorf("waking %s: %w", holder.name, err)
	}
	r.logf("chaos: woke %s after %v", holder.name, time.Since(now).Round(time.Millisecond))
	// As for every empty restart: a commit in flight may be lost with the
	// connection, and the holders re-seed the positions they acked.
	r.mu.Lock()
	r.windows = append(r.windows, Window{What: "redis restart under a paused holder", From: now.Add(-2 * r.plan.CommitPeriod), To: time.Now().Add(r.plan.LeasePeriod)})
	r.mu.Unlock()
	return nil
}
