package reader

import (
	"strings"
	"sync"

	"github.com/connect-kinesis/connect-kinesis/internal/consumer"
)

// tracker follows the batches of one shard from delivery to ack. Batches
// are delivered in sequence order but acked in any order; the checkpoint
// only advances over a contiguous run of acked batches from the oldest, so
// a gap (a batch still in the pipeline) holds it back.
type tracker struct {
	mu      sync.Mutex
	nextID  uint64
	queue   []trackedBatch    // delivered and not yet folded into done, oldest first
	done    consumer.Position // last position of the contiguous acked run
	hasDone bool
	doneGen uint64 // bumped each time done advances, so committers spot change
	notify  chan struct{}
}

type trackedBatch struct {
	id    uint64
	last  consumer.Position
	acked bool
	// records is how many records the entry stands for (one with lanes);
	// while a nacked batch is sent again in parts, how many are not done.
	records int
	// partial is how far the batch's records are done from its start,
	// when some are (advance): the checkpoint may pass them once the
	// entry is the oldest.
	partial    consumer.Position
	hasPartial bool
}

func newTracker() *tracker {
	return &tracker{notify: make(chan struct{}, 1)}
}

// add registers a batch of one record ending at last and returns its id.
func (t *tracker) add(last consumer.Position) uint64 { return t.addBatch(last, 1) }

// addBatch registers a batch of n records ending at last and returns its
// id.
func (t *tracker) addBatch(last consumer.Position, n int) uint64 {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.nextID++
	t.queue = append(t.queue, trackedBatch{id: t.nextID, last: last, records: n})
	return t.nextID
}

// drop forgets a batch that was never handed to the pipeline.
func (t *tracker) drop(id uint64) {
	t.mu.Lock()
	defer t.mu.Unlock()
	for i := range t.queue {
		if t.queue[i].id == id {
			t.queue = append(t.queue[:i], t.queue[i+1:]...)
			break
		}
	}
	t.signal()
}

// ack marks a batch processed and folds the acked prefix into done.
func (t *tracker) ack(id uint64) {
	t.mu.Lock()
	defer t.mu.Unlock()
	for i := range t.queue {
		if t.queue[i].id == id {
			t.queue[i].acked = true
			break
		}
	}
	n := 0
	for n < len(t.queue) && foldable(t.queue, n) {
		t.done, t.hasDone = t.queue[n].last, true
		n++
	}
	if n > 0 {
		t.queue = append(t.queue[:0], t.queue[n:]...)
		if len(t.queue) > 0 && t.queue[0].hasPartial {
			t.done = t.queue[0].partial
		}
		t.doneGen++
	}
	t.signal()
}

// advance notes that the records of batch id are done up to pos (hasPos),
// and that left of them are past it: a nacked batch sent again in parts. The
// checkpoint moves to pos at once when the batch is the oldest pending,
// else when the batches before it are acked.
func (t *tracker) advance(id uint64, pos consumer.Position, hasPos bool, left int) {
	t.mu.Lock()
	defer t.mu.Unlock()
	for i := range t.queue {
		if t.queue[i].id != id {
			continue
		}
		t.queue[i].records = left
		if hasPos {
			pos.Sequence = strings.Clone(pos.Sequence)
			t.queue[i].partial, t.queue[i].hasPartial = pos, true
			if i == 0 {
				t.done, t.hasDone = pos, true
				t.doneGen++
			}
		}
		break
	}
	t.signal()
}

// signal wakes a reader waiting for room or for the last ack.
func (t *tracker) signal() {
	select {
	case t.notify <- struct{}{}:
	default:
	}
}

// pending is the number of batches not yet folded into done: unacked ones
// and acked ones waiting behind a gap.
func (t *tracker) pending() int {
	t.mu.Lock()
	defer t.mu.Unlock()
	return len(t.queue)
}

// pendingRecords is how many records the pending entries hold: what the
// next checkpoint does not cover yet.
func (t *tracker) pendingRecords() int {
	t.mu.Lock()
	defer t.mu.Unlock()
	n := 0
	for _, b := range t.queue {
		n += b.records
	}
	return n
}

// checkpoint returns the highest contiguously acked position.
func (t *tracker) checkpoint() (consumer.Position, uint64, bool) {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.done, t.doneGen, t.hasDone
}
