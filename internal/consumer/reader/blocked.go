package reader

import "time"

// A record that keeps failing on its own blocks its shard: nothing after
// it is checkpointed until the pipeline processes it or the dead letter
// takes it. The lag gauge shows how long (gauge.go); this WARN says which
// record. It counts only failures charged to the record (isolate.go), so
// a downstream outage, which fails every record alike, does not raise it.

// blockedWarnFailures is how many charged failures a record has when the
// reader first warns that it blocks the shard. A fixed number: enough
// that a record processed on its second or third try says nothing, and
// reached within seconds at the default backoff.
const blockedWarnFailures = 5

// blockedWarnInterval rate-limits that WARN, per shard.
var blockedWarnInterval = time.Minute

// warnBlocked warns, at most once per blockedWarnInterval for the shard,
// that record i of d, which will be sent again, has failed
// blockedWarnFailures times or more. Under d.mu.
func (d *delivery) warnBlocked(i int) {
	iso := d.iso
	if iso.failures[i] < blockedWarnFailures {
		return
	}
	r := d.r
	now := time.Now()
	last := r.lastBlockedWarn.Load()
	if last != 0 && now.Sub(time.Unix(0, last)) < blockedWarnInterval {
		return
	}
	if !r.lastBlockedWarn.CompareAndSwap(last, now.UnixNano()) {
		return
	}
	rec := d.records()[i]
	pol := r.st.Config.Redelivery
	var next string
	switch {
	case pol.Enabled() && pol.MaxAttempts > 0:
		next = "it goes to the dead letter at redelivery.max_attempts"
	case pol.Enabled():
		next = "it goes to the dead letter once older than redelivery.max_record_age"
	default:
		next = "to move such records aside, set redelivery.dead_letter and redelivery.max_attempts (docs/poison-records.md)"
	}
	r.log.Warnf("Record %s of stream %s, shard %s has failed %d times on its own (last error: %v); the shard waits for it and nothing after it is checkpointed: %s",
		rec.Position(), r.st.Name, r.shard.ID, iso.failures[i], iso.lastErr[i], next)
}
