package consumer

import (
	"context"
	"errors"
	"time"
)

// An instance that reads shards checks, at a pace of its own and in one
// cheap call, that the store still holds the group record it knows. That
// pace, not the renewals' third of a lease period, bounds how long a
// store that came back empty goes unnoticed by a holder that Redis
// answers, and so how long a newcomer must wait before it takes anything
// from a young, un-re-seeded group record (NewcomerWait): the first record
// of a brand-new group then comes seconds, not a lease period, after the
// start.

// GroupCheckInterval is how often an instance that holds leases checks the
// group record: every second, or a third of a shorter lease period. Each
// check is bounded by half of it, so a check that hangs never delays the
// next.
func GroupCheckInterval(leasePeriod time.Duration) time.Duration {
	return min(time.Second, leasePeriod/3)
}

// NewcomerWait is how long after a group record's creation a newcomer
// waits before taking anything, while no re-seed marked the record: two
// check intervals (at most a lease period). A holder that Redis answers
// from the moment it came back empty starts a check within one interval
// of the record's creation, which finds the record replaced and wakes
// its re-seed; the second interval is the margin for those round trips.
// A re-seed holds every shard the store does not know for a lease period.
func NewcomerWait(leasePeriod time.Duration) time.Duration {
	return min(leasePeriod, 2*GroupCheckInterval(leasePeriod))
}

// join joins the group before the first take and sets when this instance
// may take its first shard. A new group's wait is no fault, so it is said
// plainly at INFO, and why at DEBUG.
func (co *coordinator) join(ctx context.Context) error {
	wait, err := co.store.Join(ctx)
	if err != nil {
		return err
	}
	co.takeAfter = time.Now().Add(wait)
	if wait <= 0 {
		return nil
	}
	w := wait.Round(time.Millisecond)
	var s Store = co.store
	if fw, ok := s.(forgetWatch); ok {
		s = fw.Store
	}
	if y, ok := s.(YoungServer); ok {
		if up, young := y.JoinedYoungServer(); young {
			co.log.Infof("New consumer group on a Redis that started %v ago: taking its first shards in %v, once Redis has been up a lease period and %v", up, w, NewcomerWait(co.c.cfg.LeasePeriod))
			co.log.Debugf("The group's record in the checkpoint store is new and no instance re-seeded it, and Redis started %v ago. A Redis that restarted empty looks the same, and instances that were paused or cut off while it restarted may still hold shards: each wakes within its lease period and writes back where it got to, so this instance takes no shard for %v", up, w)
			return nil
		}
	}
	co.log.Infof("New consumer group: taking its first shards in %v (a new group waits this once before its first take)", w)
	co.log.Debugf("The group's record in the checkpoint store is new and no instance re-seeded it. A store that just came back empty (Redis restarted or flushed) looks the same, so this instance takes no shard for %v: instances still reading check the record every %v and write back where they got to first",
		w, GroupCheckInterval(co.c.cfg.LeasePeriod))
	return nil
}

// RestartWait is how long a Redis server must have been up before a
// newcomer takes anything from a group record created since it started
// that no re-seed marked: a lease period and the newcomer wait. A Redis
// restarted empty may have had holders that were paused or cut off while it
// restarted; each of them whose lease was live then wakes within the lease
// period, finds the record replaced within a check interval and re-seeds,
// and a holder paused past its lease would have lost its shard to another
// instance anyway. A flushed Redis leaves no such trace: there the tie of
// tokens goes to the holder when it re-seeds (docs/checkpointer.md).
func RestartWait(leasePeriod time.Duration) time.Duration {
	return leasePeriod + NewcomerWait(leasePeriod)
}

// YoungServer is a Store that can tell, after Join, that it waited for its
// Redis server to have been up RestartWait, and how long it had been up.
type YoungServer interface {
	JoinedYoungServer() (uptime time.Duration, young bool)
}

// GroupChecker is a Store that can tell in one call whether it still holds
// the group record its caller knows: ErrStoreForgot when it does not. A
// Store without it is noticed to forget only by renewals.
type GroupChecker interface {
	CheckGroup(ctx context.Context) error
}

// watchGroup checks the group record every GroupCheckInterval while this
// instance reads any shard, and hands a store that forgot to the renew
// goroutine, which re-seeds it. It ends when stop is closed.
func (co *coordinator) watchGroup(stop <-chan struct{}) {
	var s Store = co.store
	if w, ok := s.(forgetWatch); ok {
		s = w.Store
	}
	g, ok := s.(GroupChecker)
	if !ok {
		return
	}
	every := GroupCheckInterval(co.c.cfg.LeasePeriod)
	t := time.NewTicker(every)
	defer t.Stop()
	for {
		select {
		case <-t.C:
			if len(co.readersNow()) == 0 {
				continue
			}
			ctx, cancel := context.WithTimeout(co.runCtx, every/2)
			err := g.CheckGroup(ctx)
			cancel()
			if errors.Is(err, ErrStoreForgot) {
				co.storeForgot()
			} else if err != nil && co.runCtx.Err() == nil {
				co.log.Debugf("Checking the group record failed; the renewals report an outage: %v", err)
			}
		case <-stop:
			return
		case <-co.runCtx.Done():
			return
		}
	}
}
