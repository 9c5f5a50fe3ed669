package reader

import (
	"context"
	"slices"
	"strconv"
	"time"

	"github.com/connect-kinesis/connect-kinesis/internal/consumer"
)

// deadLetter writes the records of d bound for the dead letter, in one
// call, retried with the reader's backoff until it succeeds: the shard
// waits meanwhile, and nothing is skipped. Only then do the records count
// as done. It returns false when ctx ends first; the records stay bound
// for the dead letter (and a next owner reads them again).
func (r *Reader) deadLetter(ctx context.Context, d *delivery) bool {
	d.mu.Lock()
	if d.iso == nil || len(d.iso.dead) == 0 {
		d.mu.Unlock()
		return true
	}
	iso := d.iso
	entries := slices.Clone(iso.dead)
	at := time.Now()
	recs := make([]consumer.DeadRecord, len(entries))
	for k, e := range entries {
		last := ""
		if iso.lastErr[e.i] != nil {
			last = iso.lastErr[e.i].Error()
		}
		recs[k] = consumer.DeadRecord{Record: d.records()[e.i], Stream: r.st.Name, Shard: r.shard.ID,
			Deliveries: iso.attempts[e.i], Failures: iso.failures[e.i], LastError: last, Reason: e.reason, At: at}
	}
	d.mu.Unlock()

	dl := r.st.Config.Redelivery.DeadLetter
	err := r.redeliverRetry.Run(func() error {
		err := dl.Write(ctx, recs)
		if err != nil && ctx.Err() == nil {
			r.st.Metrics.DeadLetterErrors.Incr(1, r.st.Name, r.shard.ID)
			r.log.Warnf("Writing %d records to the dead letter failed; the shard waits and retries: %v", len(recs), err)
		}
		return err
	})
	if err != nil {
		return false
	}
	for _, rec := range recs {
		r.st.Metrics.DeadLettered.Incr(1, r.st.Name, r.shard.ID, rec.Reason)
		sub := ""
		if rec.Aggregated {
			sub = "/" + strconv.FormatInt(rec.SubSequence, 10)
		}
		r.log.With("sequence", rec.Sequence+sub, "reason", rec.Reason).
			Errorf("Record %s%s of shard %s (stream %s) written to the dead letter (%s) after %d deliveries and %d charged failures; last error: %s",
				rec.Sequence, sub, r.shard.ID, r.st.Name, rec.Reason, rec.Deliveries, rec.Failures, rec.LastError)
	}
	d.mu.Lock()
	iso.dead = iso.dead[len(entries):]
	is := make([]int, len(entries))
	for k, e := range entries {
		is[k] = e.i
	}
	d.markDone(is)
	finished := iso.left == 0
	d.allDone = finished
	if len(entries) == 1 && len(iso.todo) > 1 {
		mergeTodo(iso)
	}
	d.mu.Unlock()
	if finished {
		d.finish()
	}
	return true
}
