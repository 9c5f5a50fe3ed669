package consumer

import (
	"sync"
	"time"
)

// The byte budget of an input (max_buffered_bytes).
//
// One budget covers every record the input holds, across all its streams
// and shards: an answer being fetched and decoded, records fetched and not
// yet handed to the pipeline, and batches in the pipeline not yet acked (a
// nacked batch stays charged until it is acked). A shard reader asks for
// room before each fetch (budget_shard.go); when the budget has none, the
// shard does not fetch.
//
// Admission is first come, first served: readers queue, and only the head
// of the queue can be let in, so a shard that waits is never overtaken by
// shards that asked later, whatever the shard count or record size. The
// head is let in when its whole estimate fits, or part of it (at least one
// record's worth: it then asks Kinesis for fewer records); and when
// nothing at all is held, whatever its estimate, so an answer larger than
// the whole budget still goes ahead, alone. Room only comes back when the
// pipeline acks, which never depends on the budget, so the queue always
// moves while the pipeline does.
type budget struct {
	capacity int64
	metrics  *metrics

	mu    sync.Mutex
	held  int64
	queue []*budgetWait // oldest first
	// peak is the most ever held, for tests and benches.
	peak int64
}

// budgetWait is one reader's place in the queue.
type budgetWait struct {
	want, min int64
	since     time.Time
	ready     chan struct{} // closed once granted
	granted   int64         // set before ready is closed
}

func newBudget(capacity int64, m *metrics) *budget {
	b := &budget{capacity: capacity, metrics: m}
	m.budget.Set(capacity)
	return b
}

// enqueue queues a request for want bytes, of which least would do.
func (b *budget) enqueue(want, least int64) *budgetWait {
	w := &budgetWait{want: want, min: min(least, want), since: time.Now(), ready: make(chan struct{})}
	b.mu.Lock()
	defer b.mu.Unlock()
	b.queue = append(b.queue, w)
	b.admitLocked()
	return w
}

// cancel takes w out of the queue; if it was granted meanwhile, its grant
// is given back.
func (b *budget) cancel(w *budgetWait) {
	b.mu.Lock()
	defer b.mu.Unlock()
	for i, q := range b.queue {
		if q == w {
			b.queue = append(b.queue[:i], b.queue[i+1:]...)
			b.admitLocked()
			return
		}
	}
	select {
	case <-w.ready:
		b.addLocked(-w.granted)
	default:
	}
}

// add charges n more bytes (less when n is negative): an answer that came
// out larger or smaller than its grant, or records released.
func (b *budget) add(n int64) {
	if n == 0 {
		return
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	b.addLocked(n)
}

func (b *budget) addLocked(n int64) {
	b.held += n
	b.peak = max(b.peak, b.held)
	b.metrics.buffered.Set(b.held)
	if n < 0 {
		b.admitLocked()
	}
}

// admitLocked lets in the head of the queue while it fits, in order.
func (b *budget) admitLocked() {
	for len(b.queue) > 0 {
		w := b.queue[0]
		free := b.capacity - b.held
		switch {
		case b.held <= 0 || free >= w.want:
			w.granted = w.want
		case free >= w.min:
			w.granted = free
		default:
			b.metrics.waiting.Set(int64(len(b.queue)))
			return
		}
		b.queue = b.queue[1:]
		b.held += w.granted
		b.peak = max(b.peak, b.held)
		close(w.ready)
	}
	b.metrics.buffered.Set(b.held)
	b.metrics.waiting.Set(0)
}

// state is what the budget holds, how many readers wait and since when
// the oldest does (zero when none).
func (b *budget) state() (held int64, waiting int, oldest time.Time) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if len(b.queue) > 0 {
		oldest = b.queue[0].since
	}
	return b.held, len(b.queue), oldest
}

// peakHeld is the most the budget ever held.
func (b *budget) peakHeld() int64 {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.peak
}
