package consumer

import (
	"context"
	"errors"
	"time"
)

// commitLoop commits the reader's progress every commit_period until stop
// closes or the reader ends.
func (r *shardReader) commitLoop(stop, done chan struct{}) {
	defer close(done)
	t := time.NewTicker(r.co.c.cfg.CommitPeriod)
	defer t.Stop()
	for {
		select {
		case <-t.C:
			_ = r.commit(r.ctx)
		case <-stop:
			return
		case <-r.ctx.Done():
			return
		}
	}
}

// commit writes the highest contiguously acked position if it moved. A
// fenced commit means the lease is gone: the reader stops at once.
func (r *shardReader) commit(ctx context.Context) error {
	r.commitMu.Lock()
	defer r.commitMu.Unlock()
	if r.lost.Load() {
		return ErrLeaseLost
	}
	pos, gen, ok := r.tracker.checkpoint()
	if !ok || gen == r.committedGen {
		return nil
	}
	l := *r.lease.Load()
	err := r.co.store.Commit(ctx, l, pos)
	switch {
	case errors.Is(err, ErrLeaseLost):
		r.markLost()
		return err
	case err != nil:
		r.log.Warnf("Committing checkpoint %s failed; retrying next period: %v", pos, err)
		return err
	}
	r.committedGen = gen
	r.co.known.committedTo(r.shard.ID, pos, l.Token)
	return nil
}
