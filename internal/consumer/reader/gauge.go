package reader

import "time"

// The gauge of the oldest nacked record a shard waits to get processed
// (kinesis_input_redelivery_oldest_seconds): the age, since its batch's
// first delivery, of the oldest batch the reader still sends again in
// parts. It is set when a batch starts or ends isolation and every
// commit_period (commitLoop), and to 0 when the reader ends. It reports the
// live reader only: a verdict that comes after the reader ended (a nack
// after a hand-off, a late ack of a part) changes nothing, since nobody
// here sends those records again; the gauge is set under redeliverMu, so
// no such verdict lands after the reader's 0.

// isolationStarted notes that d failed and is followed record by record.
func (r *Reader) isolationStarted(d *delivery) {
	r.redeliverMu.Lock()
	defer r.redeliverMu.Unlock()
	if r.oldestEnded {
		return
	}
	if r.isolating == nil {
		r.isolating = map[*delivery]time.Time{}
	}
	r.isolating[d] = d.at
	r.reportOldestLocked(false)
}

// isolationEnded notes that every record of d is done.
func (r *Reader) isolationEnded(d *delivery) {
	r.redeliverMu.Lock()
	defer r.redeliverMu.Unlock()
	if _, ok := r.isolating[d]; !ok || r.oldestEnded {
		return
	}
	delete(r.isolating, d)
	r.reportOldestLocked(false)
}

// reportOldest sets the gauge from the batches being isolated; tick is
// the periodic call, which leaves alone a shard with none.
func (r *Reader) reportOldest(tick bool) {
	r.redeliverMu.Lock()
	defer r.redeliverMu.Unlock()
	if !r.oldestEnded {
		r.reportOldestLocked(tick)
	}
}

// reportOldestLocked is reportOldest under redeliverMu.
func (r *Reader) reportOldestLocked(tick bool) {
	if tick && len(r.isolating) == 0 {
		return
	}
	var oldest time.Time
	for _, at := range r.isolating {
		if oldest.IsZero() || at.Before(oldest) {
			oldest = at
		}
	}
	var secs int64
	if !oldest.IsZero() {
		secs = int64(time.Since(oldest) / time.Second)
	}
	r.st.Metrics.RedeliveryOldest.Set(secs, r.st.Name, r.shard.ID)
}

// endOldest zeroes the gauge as the reader ends, for good: the batches it
// isolated are nobody's here any more.
func (r *Reader) endOldest() {
	r.redeliverMu.Lock()
	defer r.redeliverMu.Unlock()
	r.oldestEnded = true
	r.isolating = nil
	r.st.Metrics.RedeliveryOldest.Set(0, r.st.Name, r.shard.ID)
}
