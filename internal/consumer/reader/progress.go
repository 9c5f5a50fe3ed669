package reader

import (
	"math"
	"sync"
	"sync/atomic"
	"time"

	"github.com/connect-kinesis/connect-kinesis/internal/consumer"
)

// readerProgress is what a reader knows of its own progress; the reader
// writes it, the renewal goroutine reads it.
type readerProgress struct {
	known         atomic.Bool
	lagMillis     atomic.Int64
	lastDelivered atomic.Int64 // Unix milliseconds; 0 before the first delivery
	bytes         atomic.Int64 // record data first delivered, in all

	// rateMu guards where the previous rate measurement ended; only the
	// publisher measures, but a test may too.
	rateMu    sync.Mutex
	rateBytes int64
	rateAt    time.Time
	rateAvg   int64
	rateSeen  bool
}

func (p *readerProgress) observeLag(behind int64) {
	p.lagMillis.Store(behind)
	p.known.Store(true)
}

func (p *readerProgress) observeDelivery(at time.Time, bytes int64) {
	p.lastDelivered.Store(at.UnixMilli())
	p.bytes.Add(bytes)
}

// startRate starts the first rate measurement at the reader's start.
func (p *readerProgress) startRate(at time.Time) {
	p.rateMu.Lock()
	defer p.rateMu.Unlock()
	p.rateAt = at
}

// rateSmoothing is the time constant of the published rate's moving
// average, in publish periods (lease_period / 3 each): batches arrive in
// bursts (one GetRecords answer may hold seconds of a quiet shard's
// records), so a single period's rate swings between zero and several
// times the shard's load.
const rateSmoothing = 3

// rate returns the bytes per second first delivered, as an exponentially
// weighted moving average over about rateSmoothing publish periods of
// length period, and starts the next measurement. The first measurement
// (since the reader started) is taken as it is.
func (p *readerProgress) rate(now time.Time, period time.Duration) int64 {
	p.rateMu.Lock()
	defer p.rateMu.Unlock()
	total := p.bytes.Load()
	elapsed := now.Sub(p.rateAt)
	if p.rateAt.IsZero() || elapsed <= 0 {
		p.rateBytes, p.rateAt = total, now
		return p.rateAvg
	}
	window := float64(total-p.rateBytes) / elapsed.Seconds()
	if !p.rateSeen {
		p.rateAvg, p.rateSeen = int64(window), true
	} else {
		alpha := 1 - math.Exp(-elapsed.Seconds()/(rateSmoothing*period.Seconds()))
		p.rateAvg = int64(float64(p.rateAvg) + alpha*(window-float64(p.rateAvg)))
	}
	p.rateBytes, p.rateAt = total, now
	return p.rateAvg
}

// snapshot returns the progress, ok false before the first GetRecords answer.
func (p *readerProgress) snapshot() (consumer.Progress, bool) {
	if !p.known.Load() {
		return consumer.Progress{}, false
	}
	out := consumer.Progress{LagMillis: p.lagMillis.Load()}
	if ms := p.lastDelivered.Load(); ms > 0 {
		out.LastDelivered = time.UnixMilli(ms)
	}
	return out, true
}
