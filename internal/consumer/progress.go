package consumer

import (
	"context"
	"sync"
	"sync/atomic"
	"time"
)

// Progress is how far a shard's reader has come, as its owner publishes it
// with each lease renewal for `checkpoints show`: never per record, so it
// costs one store call per instance per renewal.
type Progress struct {
	// LagMillis is the MillisBehindLatest of the shard's latest GetRecords
	// answer.
	LagMillis int64
	// LastDelivered is when the reader last handed a batch to the pipeline
	// (zero if it has not yet).
	LastDelivered time.Time
	// BytesPerSecond is the rate of record data first delivered from the
	// shard since the previous publish: the shard's load, which balancing
	// by load (lease.balance: load) weighs shards by.
	BytesPerSecond int64
}

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

// rate returns the bytes per second first delivered since the previous
// call (or since the reader started), and starts the next measurement.
// Publishes come every lease_period / 3, so the rate is an average over
// that window: a single large batch does not make a shard look hot.
func (p *readerProgress) rate(now time.Time) int64 {
	p.rateMu.Lock()
	defer p.rateMu.Unlock()
	total := p.bytes.Load()
	elapsed := now.Sub(p.rateAt)
	if p.rateAt.IsZero() || elapsed <= 0 {
		p.rateBytes, p.rateAt = total, now
		return 0
	}
	r := int64(float64(total-p.rateBytes) / elapsed.Seconds())
	p.rateBytes, p.rateAt = total, now
	return r
}

// snapshot returns the progress, ok false before the first GetRecords answer.
func (p *readerProgress) snapshot() (Progress, bool) {
	if !p.known.Load() {
		return Progress{}, false
	}
	out := Progress{LagMillis: p.lagMillis.Load()}
	if ms := p.lastDelivered.Load(); ms > 0 {
		out.LastDelivered = time.UnixMilli(ms)
	}
	return out, true
}

// publishProgress publishes the progress of every shard read here in one
// store call, bounded like a renewal. A failure only costs the operator's
// view, so it is logged at debug.
func (co *coordinator) publishProgress() {
	current := co.readersNow()
	ps := make(map[string]Progress, len(current))
	for id, r := range current {
		if r.lost.Load() {
			continue
		}
		if p, ok := r.progress.snapshot(); ok {
			p.BytesPerSecond = r.progress.rate(time.Now())
			ps[id] = p
		}
	}
	if len(ps) == 0 {
		return
	}
	ctx, cancel := context.WithTimeout(co.runCtx, co.c.cfg.LeasePeriod/6)
	defer cancel()
	if err := co.store.PublishProgress(ctx, co.c.owner, ps); err != nil && co.runCtx.Err() == nil {
		co.log.Debugf("Publishing shard progress failed: %v", err)
	}
}
