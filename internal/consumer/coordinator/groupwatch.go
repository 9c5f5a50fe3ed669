package coordinator

import (
	"context"
	"errors"
	"sync"
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

// watchGroup has the consumer's group watch check this stream's group
// record every GroupCheckInterval while this instance reads any of its
// shards, and hands a store that forgot to the renew goroutine, which
// re-seeds it. It returns when stop is closed.
func (co *coordinator) watchGroup(stop <-chan struct{}) {
	var s consumer.Store = co.store
	if w, ok := s.(forgetWatch); ok {
		s = w.Store
	}
	if _, ok := s.(consumer.GroupChecker); !ok {
		return
	}
	co.c.groups.add(co, s, consumer.GroupCheckInterval(co.c.cfg.LeasePeriod))
	defer co.c.groups.remove(co)
	select {
	case <-stop:
	case <-co.runCtx.Done():
	}
}

// groupWatch checks, for every stream of the consumer that reads shards, that
// the store still holds the group record, all streams in one round a
// check interval: one call for all of them where the store can batch
// (consumer.GroupsChecker, a Redis that is not a Cluster), so the check
// costs an instance one call a second however many streams it reads. It
// runs while any stream is watched.
type groupWatch struct {
	mu      sync.Mutex
	watched map[*coordinator]consumer.Store
	running bool
}

func (w *groupWatch) add(co *coordinator, s consumer.Store, every time.Duration) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.watched == nil {
		w.watched = map[*coordinator]consumer.Store{}
	}
	w.watched[co] = s
	if !w.running {
		w.running = true
		go w.run(every)
	}
}

func (w *groupWatch) remove(co *coordinator) {
	w.mu.Lock()
	defer w.mu.Unlock()
	delete(w.watched, co)
}

// run ticks until no stream is watched.
func (w *groupWatch) run(every time.Duration) {
	t := time.NewTicker(every)
	defer t.Stop()
	for range t.C {
		w.mu.Lock()
		if len(w.watched) == 0 {
			w.running = false
			w.mu.Unlock()
			return
		}
		var coords []*coordinator
		var stores []consumer.Store
		for co, s := range w.watched {
			if co.runCtx.Err() == nil && len(co.readersNow()) > 0 {
				coords = append(coords, co)
				stores = append(stores, s)
			}
		}
		w.mu.Unlock()
		w.round(coords, stores, every)
	}
}

// round checks each coordinator's group record, bounded by half the
// interval so that a check that hangs never delays the next.
func (w *groupWatch) round(coords []*coordinator, stores []consumer.Store, every time.Duration) {
	if len(coords) == 0 {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), every/2)
	defer cancel()
	errs := make([]error, len(stores))
	if g, ok := stores[0].(consumer.GroupsChecker); ok {
		errs = g.CheckGroups(ctx, stores)
	} else {
		for i, s := range stores {
			errs[i] = s.(consumer.GroupChecker).CheckGroup(ctx)
		}
	}
	for i, err := range errs {
		co := coords[i]
		if errors.Is(err, consumer.ErrStoreForgot) {
			co.storeForgot()
		} else if err != nil && co.runCtx.Err() == nil {
			co.log.Debugf("Checking the group record failed; the renewals report an outage: %v", err)
		}
	}
}
