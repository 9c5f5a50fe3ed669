package reader

import (
	"sync/atomic"
	"time"
)

// processedEpoch is the origin of Processed's clock; durations since it
// keep the monotonic reading, so a wall clock step changes nothing.
var processedEpoch = time.Now()

// Processed is when the input's pipeline last processed a record, over
// every stream and shard of the input: the evidence that the downstream
// is up. A failure that no record of the same hand-over escaped (a
// record failing alone, or a whole part failing without isolation) is
// charged to its records only when some record was processed since
// their previous failure (isolate.go); otherwise it may be an outage,
// which must never drain a stream into the dead letter.
type Processed struct {
	at atomic.Int64 // nanoseconds since processedEpoch; 0: never
}

// note records that a verdict at now processed at least one record.
func (p *Processed) note(now time.Time) {
	at := int64(now.Sub(processedEpoch)) + 1
	for {
		old := p.at.Load()
		if old >= at || p.at.CompareAndSwap(old, at) {
			return
		}
	}
}

// since says a record was processed after t.
func (p *Processed) since(t time.Time) bool {
	at := p.at.Load()
	return at != 0 && at-1 > int64(t.Sub(processedEpoch))
}
