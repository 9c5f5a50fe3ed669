package consumer

import (
	"context"
	"time"

	"github.com/aws/aws-sdk-go-v2/service/kinesis/types"
)

// admit waits for the shard's turn in the byte budget before a fetch
// (true). It returns false, with ok still true, when an ack or nack comes
// first: the reader then serves it (a redelivery needs no new room) and
// asks again, keeping its place in the queue. ok is false when ctx ends.
func (r *shardReader) admit(ctx context.Context) (in, ok bool) {
	select {
	case <-r.budget.ask():
		r.budget.take()
		return true, true
	default:
	}
	select {
	case <-r.budget.ask():
		r.budget.take()
		return true, true
	case <-r.tracker.notify:
		return false, true
	case <-ctx.Done():
		return false, false
	}
}

// answered tells the shard's budget what the source returned: the records
// to size the next fetch by, or a failure (its room is given back).
func (s *shardBudget) answered(recs []types.Record, err error) {
	if s == nil || s.b == nil {
		return
	}
	if err != nil {
		s.settle(nil)
		return
	}
	s.observe(recs)
}

// budgetCheckInterval is how often the budget's waiters are looked at for
// the warning; budgetEpisodeGap is how long no shard may wait for a
// warning's episode to end.
const (
	budgetCheckInterval = time.Second
	budgetEpisodeGap    = time.Minute
)

// budgetWarnAfter is how long shards may wait for the budget before a
// warning: lag_warn_threshold, or when it is 0 the least of the streams'
// own thresholds (half the retention).
func (c *Consumer) budgetWarnAfter(coords []*coordinator) time.Duration {
	if c.cfg.LagWarnThreshold > 0 {
		return c.cfg.LagWarnThreshold
	}
	var least time.Duration
	for _, co := range coords {
		if co.lagWarn > 0 && (least == 0 || co.lagWarn < least) {
			least = co.lagWarn
		}
	}
	return least
}

// watchBudget warns once per episode when the budget has held shards back
// for longer than after: an episode lasts until no shard waited for a whole
// gap. One warning for the input, not one per shard: every waiting shard
// waits for the same reason. It looks every tick.
func (c *Consumer) watchBudget(ctx context.Context, after, gap, tick time.Duration) {
	t := time.NewTicker(tick)
	defer t.Stop()
	warned := false
	var lastWaiting time.Time
	for {
		select {
		case <-t.C:
		case <-ctx.Done():
			return
		}
		held, waiting, oldest := c.budget.state()
		now := time.Now()
		if waiting > 0 {
			lastWaiting = now
		}
		switch {
		case waiting > 0 && !warned && after > 0 && now.Sub(oldest) > after:
			warned = true
			c.log.With("waiting_shards", waiting, "buffered_bytes", held, "max_buffered_bytes", c.budget.capacity).
				Warnf("The input's byte budget (max_buffered_bytes %d) has held shards back for %v, longer than lag_warn_threshold (%v): %d shards wait to fetch while %d bytes of records wait in the input or for the pipeline's acks. The pipeline is slower than the streams; raise max_buffered_bytes if the process has the memory, or speed the pipeline up",
					c.budget.capacity, now.Sub(oldest).Round(time.Second), after, waiting, held)
		case warned && waiting == 0 && now.Sub(lastWaiting) >= gap:
			warned = false
			c.log.Infof("The input's byte budget no longer holds shards back (none waited for %v)", gap)
		}
	}
}
