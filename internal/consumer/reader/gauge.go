package reader

import "time"

// The gauge of the oldest nacked record a shard waits to get processed
// (kinesis_input_redelivery_oldest_seconds): the age, since its batch's
// first delivery, of the oldest batch the reader still sends again in
// parts. It is set when a batch starts or ends isolation and every
// commit_period (commitLoop), and to 0 when the reader ends.

// isolationStarted notes that d failed and is followed record by record.
func (r *Reader) isolationStarted(d *delivery) {
	r.redeliverMu.Lock()
	if r.isolating == nil {
		r.isolating = map[*delivery]time.Time{}
	}
	r.isolating[d] = d.at
	r.redeliverMu.Unlock()
	r.reportOldest(false)
}

// isolationEnded notes that every record of d is done.
func (r *Reader) isolationEnded(d *delivery) {
	r.redeliverMu.Lock()
	_, ok := r.isolating[d]
	delete(r.isolating, d)
	r.redeliverMu.Unlock()
	if ok {
		r.reportOldest(false)
	}
}

// reportOldest sets the gauge from the batches being isolated; tick is
// the periodic call, which leaves alone a shard with none.
func (r *Reader) reportOldest(tick bool) {
	r.redeliverMu.Lock()
	if tick && len(r.isolating) == 0 {
		r.redeliverMu.Unlock()
		return
	}
	var oldest time.Time
	for _, at := range r.isolating {
		if oldest.IsZero() || at.Before(oldest) {
			oldest = at
		}
	}
	r.redeliverMu.Unlock()
	var secs int64
	if !oldest.IsZero() {
		secs = int64(time.Since(oldest) / time.Second)
	}
	r.st.Metrics.RedeliveryOldest.Set(secs, r.st.Name, r.shard.ID)
}
