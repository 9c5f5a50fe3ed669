package chaos

import (
	"cmp"
	"context"
	"fmt"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"

	"github.com/connect-kinesis/connect-kinesis/internal/consumer"
)

// pausedHolderWake is how long after Redis came back empty the paused
// holder of the PausedHolder phase wakes, as from a long GC or VM pause.
const pausedHolderWake = 3 * time.Second

// With ClosesParent: the holder's shard is split parentSplitAfter into the
// pause, and Redis goes down parentRestartAfter into it, past
// LatestSkewMargin (5 s), so that `latest` under the group record made
// after the restart starts after records only the holder knew. The holder
// wakes once another instance closed the parent, which it must within
// parentClosedWithin of the restart (the newcomer wait, a take and a read
// of a closed shard, on a busy machine).
const (
	parentSplitAfter   = 4 * time.Second
	parentRestartAfter = 6 * time.Second
	parentClosedWithin = 45 * time.Second
	// wonBackWithin bounds how long after the holder woke what it had not
	// delivered of the shards it won back is delivered (a busy machine's
	// 30 s).
	wonBackWithin = 30 * time.Second
)

// restartUnderAPausedHolder is the Redis restart of the PausedHolder
// phase: the instance holding the most shards is frozen (SIGSTOP), Redis
// restarts empty, a newcomer instance starts the moment it is back, and the
// holder wakes pausedHolderWake later. The newcomer must take nothing the
// holder held before the holder re-seeded it (the store restarted, so the
// newcomer waits until Redis has been up a lease period), and the holder
// goes on from its own position: nothing lost, nothing out of order.
//
// With ClosesParent, a shard the holder holds is split during the pause,
// and the holder sleeps until another instance took that closed parent,
// read it from `latest` to its end and closed it: the holder's re-seed
// must win the parent back and read the records between its position and
// the newcomer's start (issue 59, item 2). The run fails if the parent was
// not closed so: the phase would not have tested its case.
func (r *runner) restartUnderAPausedHolder(ctx context.Context) error {
	leases, err := r.store.Leases(ctx)
	if err != nil {
		return fmt.Errorf("reading the leases before the pause: %w", err)
	}
	r.mu.Lock()
	var holder *incarnation
	most, holderPID := 0, ""
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
			holder, most, holderPID = in, n, pid
		}
	}
	r.mu.Unlock()
	if holder == nil {
		return fmt.Errorf("no live instance holds a lease: there is no holder to pause")
	}
	var stopped []string
	if r.cfg.ClosesParent {
		if stopped, err = r.leaveOnlyHolder(ctx, holder, holderPID); err != nil {
			return err
		}
		// Restarted once the holder woke, whichever way this returns.
		defer func() {
			for _, name := range stopped {
				if err := r.ensureRunning(name); err != nil {
					r.logf("chaos: starting %s again: %v", name, err)
				}
			}
		}()
		if leases, err = r.store.Leases(ctx); err != nil {
			return fmt.Errorf("reading the leases before the pause: %w", err)
		}
		most = 0
		for _, l := range leases {
			if !l.Expired && strings.Contains(l.Owner, holderPID) {
				most++
			}
		}
	}
	now := time.Now()
	if err := holder.cmd.Process.Signal(syscall.SIGSTOP); err != nil {
		return fmt.Errorf("pausing %s: %w", holder.name, err)
	}
	// Woken on every path, so that the run can stop it.
	defer func() { _ = holder.cmd.Process.Signal(syscall.SIGCONT) }()
	r.logf("chaos: paused %s (holds %d shards) at %s while Redis restarts empty", holder.name, most, now.Format("15:04:05.000"))
	var parent string
	if r.cfg.ClosesParent {
		if parent, err = r.splitHeld(ctx, leases, holderPID, now.Add(parentSplitAfter)); err != nil {
			return err
		}
		if err := sleepUntil(ctx, now.Add(parentRestartAfter)); err != nil {
			return err
		}
	}
	r.red.Stop()
	if err := r.red.Start(ctx); err != nil {
		return err
	}
	if err := r.start("n"); err != nil {
		return fmt.Errorf("starting the newcomer: %w", err)
	}
	if r.cfg.ClosesParent {
		if err := r.waitClosedByAnother(ctx, parent, holder.name, time.Now()); err != nil {
			return err
		}
	} else if err := sleepUntil(ctx, time.Now().Add(pausedHolderWake)); err != nil {
		return err
	}
	if err := holder.cmd.Process.Signal(syscall.SIGCONT); err != nil {
		return fmt.Errorf("waking %s: %w", holder.name, err)
	}
	// The wall clock of the pause and the wake, to read the instances'
	// delivery files against (their lines carry the same clock).
	woke := time.Now()
	r.logf("chaos: woke %s after %v at %s", holder.name, woke.Sub(now).Round(time.Millisecond), woke.Format("15:04:05.000"))
	// As for every empty restart: a commit in flight may be lost with the
	// connection, and the holders re-seed the positions they acked.
	r.mu.Lock()
	r.windows = append(r.windows, Window{What: "redis restart under a paused holder", From: now.Add(-2 * r.plan.CommitPeriod), To: time.Now().Add(r.plan.LeasePeriod)})
	if r.cfg.ClosesParent {
		// The newcomer read the holder's shards on from `latest`; the
		// holder wins them back with its own position, and what lay
		// between comes (from the holder, or from whoever it hands a shard
		// to) after the newcomer's later records of the same keys.
		held := map[string]bool{}
		for shard, l := range leases {
			if !l.Expired && strings.Contains(l.Owner, holderPID) {
				held[shard] = true
			}
		}
		r.windows = append(r.windows, wonBackWindow(holder.name, held, now, woke, r.plan))
	}
	r.mu.Unlock()
	return nil
}

// wonBackWindow is the Reorders window of the shards (held) a holder
// paused at paused and woken at woke wins back from a newcomer. The
// newcomer reads on until its first store call after the holder's
// re-seed, which renews its leases within a lease period: what it
// delivers until then is as much the newcomer's `latest` as what it
// delivered before the wake (the phase woke the holder the moment the
// parent was closed, and the newcomer's first batch of another shard
// often came a few hundred ms later).
func wonBackWindow(holder string, held map[string]bool, paused, woke time.Time, p Plan) Window {
	return Window{What: "shards won back by " + holder, Shards: held, After: paused, From: woke, To: woke.Add(wonBackWithin), Reorders: true, Grace: p.LeasePeriod, Holder: holder}
}

// leaveOnlyHolder stops every live instance but holder gracefully (each
// commits and releases its shards) and waits until holder, whose lease
// owners contain pid, holds every open shard; it returns the names of the
// instances it stopped. Any other live instance would re-seed the group
// record, with its first start, after Redis came back empty, and
// `latest` would keep its meaning for the newcomer: the case needs a
// newcomer that reads from its own new record while only the paused
// holder knows where the parent was read to.
func (r *runner) leaveOnlyHolder(ctx context.Context, holder *incarnation, pid string) ([]string, error) {
	r.mu.Lock()
	var names []string
	var others []*incarnation
	for name, in := range r.instances {
		if in != holder {
			names, others = append(names, name), append(others, in)
		}
	}
	r.mu.Unlock()
	for _, in := range others {
		_ = in.cmd.Process.Signal(syscall.SIGTERM) // one already dead is restarted later
	}
	for _, in := range others {
		select {
		case <-in.done:
		case <-ctx.Done():
			return names, ctx.Err()
		}
	}
	r.logf("chaos: stopped %v; %s is to hold every shard", names, holder.name)
	deadline := time.Now().Add(30 * time.Second)
	for {
		open, err := r.openShards(ctx)
		if err != nil {
			return names, err
		}
		leases, err := r.store.Leases(ctx)
		if err != nil {
			return names, err
		}
		all := true
		for _, s := range open {
			if l, ok := leases[aws.ToString(s.ShardId)]; !ok || l.Expired || !strings.Contains(l.Owner, pid) {
				all = false
			}
		}
		if all {
			return names, nil
		}
		if time.Now().After(deadline) {
			return names, fmt.Errorf("%s did not take every open shard within 30s of the others' stop", holder.name)
		}
		if err := sleepUntil(ctx, time.Now().Add(200*time.Millisecond)); err != nil {
			return names, err
		}
	}
}

// splitHeld splits, at, an open shard of the stream whose lease (leases,
// read before the pause) the instance with pid holds, and returns it.
func (r *runner) splitHeld(ctx context.Context, leases map[string]consumer.LeaseState, pid string, at time.Time) (string, error) {
	if err := sleepUntil(ctx, at); err != nil {
		return "", err
	}
	open, err := r.openShards(ctx)
	if err != nil {
		return "", fmt.Errorf("listing the shards to split one the paused holder holds: %w", err)
	}
	for _, s := range open {
		if l, ok := leases[aws.ToString(s.ShardId)]; ok && !l.Expired && strings.Contains(l.Owner, pid) {
			return aws.ToString(s.ShardId), r.splitShard(ctx, streamName, s)
		}
	}
	return "", fmt.Errorf("the paused holder holds no open shard to split (leases %v)", leases)
}

// waitClosedByAnother waits until the store lists parent closed, since
// Redis came back empty (restarted), while holder sleeps, and notes the
// evidence for the table. The holder cannot have closed it: it is paused.
func (r *runner) waitClosedByAnother(ctx context.Context, parent, holder string, restarted time.Time) error {
	deadline := restarted.Add(parentClosedWithin)
	reader := ""
	for {
		// Redis may be paused by the schedule meanwhile: short calls.
		cctx, cancel := context.WithTimeout(ctx, time.Second)
		closed, err := r.store.ClosedShards(cctx)
		if leases, lerr := r.store.Leases(cctx); lerr == nil {
			if l, ok := leases[parent]; ok && l.Owner != "" {
				reader = r.incarnationOf(l.Owner)
			}
		}
		cancel()
		if err == nil && closed[parent] {
			r.mu.Lock()
			r.scenario = fmt.Sprintf("parent %s, held by paused %s, closed by %s %v after Redis came back empty; then %s woke",
				parent, holder, cmp.Or(reader, "another instance"), time.Since(restarted).Round(100*time.Millisecond), holder)
			r.mu.Unlock()
			r.logf("chaos: %s", r.scenario)
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("no instance closed parent %s within %v of Redis coming back empty while %s slept: the phase did not test its case", parent, parentClosedWithin, holder)
		}
		if err := sleepUntil(ctx, time.Now().Add(200*time.Millisecond)); err != nil {
			return err
		}
	}
}

// sleepUntil waits until t or the end of ctx.
func sleepUntil(ctx context.Context, t time.Time) error {
	select {
	case <-time.After(time.Until(t)):
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// incarnationOf names the live incarnation whose process holds a lease
// with owner (which holds its PID), else owner itself.
func (r *runner) incarnationOf(owner string) string {
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, in := range r.instances {
		if strings.Contains(owner, "-"+strconv.Itoa(in.cmd.Process.Pid)+"-") {
			return in.name
		}
	}
	return owner
}
