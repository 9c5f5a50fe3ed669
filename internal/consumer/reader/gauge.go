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
//
// The lag gauge (kinesis_input_millis_behind_latest) is set at the same
// times: a shard that waits for a failing record fetches nothing new, so
// the last answer's MillisBehindLatest (0 for a shard read to its tip)
// would say it is current while it is not. While a batch is isolated the
// gauge is the larger of that answer's lag and the age, by its arrival in
// Kinesis, of the oldest record not done.

// isolated is what the gauges need of a batch being isolated.
type isolated struct {
	at      time.Time // its first delivery
	arrival time.Time // the arrival of its oldest record not done
}

// isolationStarted notes that d failed and is followed record by record.
// Under d.mu.
func (r *Reader) isolationStarted(d *delivery) {
	r.redeliverMu.Lock()
	defer r.redeliverMu.Unlock()
	if r.oldestEnded {
		return
	}
	if r.isolating == nil {
		r.isolating = map[*delivery]isolated{}
	}
	var arrival time.Time
	if recs := d.records(); len(recs) > 0 {
		arrival = recs[0].Arrival
	}
	r.isolating[d] = isolated{at: d.at, arrival: arrival}
	r.reportOldestLocked(false)
}

// isolationProgress notes that the oldest record of d not done arrived
// at arrival. Under d.mu.
func (r *Reader) isolationProgress(d *delivery, arrival time.Time) {
	r.redeliverMu.Lock()
	defer r.redeliverMu.Unlock()
	is, ok := r.isolating[d]
	if !ok || r.oldestEnded {
		return
	}
	is.arrival = arrival
	r.isolating[d] = is
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

// reportOldest sets the gauges from the batches being isolated; tick is
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
	for _, is := range r.isolating {
		if oldest.IsZero() || is.at.Before(oldest) {
			oldest = is.at
		}
	}
	var secs int64
	if !oldest.IsZero() {
		secs = int64(time.Since(oldest) / time.Second)
	}
	r.st.Metrics.RedeliveryOldest.Set(secs, r.st.Name, r.shard.ID)
	behind := max(r.srcBehind.Load(), r.blockedMillisLocked())
	r.progress.observeLag(behind)
	r.st.Metrics.Behind.Set(behind, r.st.Name, r.shard.ID)
}

// blockedMillisLocked is the age in milliseconds of the oldest record not
// done of the batches being isolated, 0 without one; under redeliverMu.
func (r *Reader) blockedMillisLocked() int64 {
	var first time.Time
	for _, is := range r.isolating {
		if !is.arrival.IsZero() && (first.IsZero() || is.arrival.Before(first)) {
			first = is.arrival
		}
	}
	if first.IsZero() {
		return 0
	}
	return max(0, time.Since(first).Milliseconds())
}

// blockedMillis is blockedMillisLocked, taking redeliverMu.
func (r *Reader) blockedMillis() int64 {
	r.redeliverMu.Lock()
	defer r.redeliverMu.Unlock()
	return r.blockedMillisLocked()
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
