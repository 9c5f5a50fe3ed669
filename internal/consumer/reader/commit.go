package reader

import (
	"context"
	"errors"
	"time"

	"github.com/connect-kinesis/connect-kinesis/internal/consumer"
)

// commitLoop commits the reader's progress every commit_period until stop
// closes or the reader ends.
func (r *Reader) commitLoop(stop, done chan struct{}) {
	defer close(done)
	t := time.NewTicker(r.st.Config.CommitPeriod)
	defer t.Stop()
	for {
		select {
		case <-t.C:
			_ = r.commit(r.ctx)
			r.reportOldest(true)
		case <-stop:
			return
		case <-r.ctx.Done():
			return
		}
	}
}

// commit writes the highest contiguously acked position if it moved. A
// fenced commit means the lease is gone: the reader stops at once.
func (r *Reader) commit(ctx context.Context) error {
	r.commitMu.Lock()
	defer r.commitMu.Unlock()
	if r.lost.Load() {
		return consumer.ErrLeaseLost
	}
	pos, gen, ok := r.tracker.checkpoint()
	if !ok || gen == r.committedGen {
		return nil
	}
	l := *r.lease.Load()
	err := r.st.Store.Commit(ctx, l, pos)
	switch {
	case errors.Is(err, consumer.ErrLeaseLost):
		r.MarkLost()
		return err
	case err != nil:
		r.log.Warnf("Committing checkpoint %s failed; retrying next period: %v", pos, err)
		return err
	}
	r.committedGen = gen
	r.st.Committed(r.shard.ID, pos, l.Token)
	return nil
}
