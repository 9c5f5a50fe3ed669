package coordinator

import (
	"context"
	"errors"
	"time"

	"github.com/connect-kinesis/connect-kinesis/internal/consumer"
)

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
	var s consumer.Store = co.store
	if fw, ok := s.(forgetWatch); ok {
		s = fw.Store
	}
	if y, ok := s.(consumer.YoungServer); ok {
		if up, young := y.JoinedYoungServer(); young {
			co.log.Infof("New consumer group on a Redis that started %v ago: taking its first shards in %v, once Redis has been up a lease period and %v", up, w, consumer.NewcomerWait(co.c.cfg.LeasePeriod))
			co.log.Debugf("The group's record in the checkpoint store is new and no instance re-seeded it, and Redis started %v ago. A Redis that restarted empty looks the same, and instances that were paused or cut off while it restarted may still hold shards: each wakes within its lease period and writes back where it got to, so this instance takes no shard for %v", up, w)
			return nil
		}
	}
	co.log.Infof("New consumer group: taking its first shards in %v (a new group waits this once before its first take)", w)
	co.log.Debugf("The group's record in the checkpoint store is new and no instance re-seeded it. A store that just came back empty (Redis restarted or flushed) looks the same, so this instance takes no shard for %v: instances still reading check the record every %v and write back where they got to first",
		w, consumer.GroupCheckInterval(co.c.cfg.LeasePeriod))
	return nil
}

// watchGroup checks the group record every GroupCheckInterval while this
// instance reads any shard, and hands a store that forgot to the renew
// goroutine, which re-seeds it. It ends when stop is closed.
func (co *coordinator) watchGroup(stop <-chan struct{}) {
	var s consumer.Store = co.store
	if w, ok := s.(forgetWatch); ok {
		s = w.Store
	}
	g, ok := s.(consumer.GroupChecker)
	if !ok {
		return
	}
	every := consumer.GroupCheckInterval(co.c.cfg.LeasePeriod)
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
			if errors.Is(err, consumer.ErrStoreForgot) {
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
