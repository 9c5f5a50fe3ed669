package coordinator

import (
	"context"
	"time"

	"github.com/connect-kinesis/connect-kinesis/internal/consumer"
)

// publishProgress publishes the progress of every shard read here in one
// store call, bounded like a renewal. A failure only costs the operator's
// view, so it is logged at debug.
func (co *coordinator) publishProgress() {
	ps := co.progressToPublish()
	if len(ps) == 0 {
		return
	}
	ctx, cancel := context.WithTimeout(co.runCtx, co.c.cfg.LeasePeriod/6)
	defer cancel()
	if err := co.store.PublishProgress(ctx, co.c.owner, ps); err != nil && co.runCtx.Err() == nil {
		co.log.Debugf("Publishing shard progress failed: %v", err)
	}
}

// progressToPublish is the progress of every shard read here.
func (co *coordinator) progressToPublish() map[string]consumer.Progress {
	current := co.readersNow()
	ps := make(map[string]consumer.Progress, len(current))
	for id, r := range current {
		if r.Lost() {
			continue
		}
		if p, ok := r.Progress(time.Now(), co.c.cfg.LeasePeriod/3); ok {
			ps[id] = p
		}
	}
	return ps
}
