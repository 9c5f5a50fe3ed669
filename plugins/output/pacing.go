package output

import (
	"context"
	"sync"
	"time"

	"github.com/redpanda-data/benthos/v4/public/service"
)

// Pacing: an ordered output forms no batch that could only wait.
//
// Every batch Benthos has formed is held in memory (each message with its
// transaction, metadata and context, a few KiB) until its write ends, and
// an ordered output with batching takes up to max_in_flight batches at
// once. When the batches share partition keys (a key in every batch), a
// batch can send nothing before the one before it has ended: the batches
// beyond the first only wait, and hold their messages while they do. With
// 64 in flight of 500 messages, that was most of the process' memory
// (about 230 MiB more than the pipeline without the output), for no
// throughput, as a key lands one record per round trip however many
// batches hold it.
//
// So the output's batching holds the next batch back before it forms it
// (and with it the input behind it) while the batch before it has not yet
// sent or started to wait, or while maxWaitingWrites writes already wait
// with nothing they may send. Batches whose keys do not collide never wait,
// so they still go max_in_flight at once; batches that would only wait are
// not formed until a write ends. The output's processor kinesis_batch_order
// (batchorder.go) paces and numbers each batch in one call: Benthos wraps
// every processor's call in a span per message, which at 500 messages a
// batch costs more than either does. Only a policy with processors of its
// own runs it twice, pacing before them and numbering after, because a
// processor that splits a batch (split, group_by, group_by_value) has the
// processors after it run once per part, while the parts reach the output
// as one batch, joined again: pacing per part held every part after the
// first back for a part that could not reach its write yet.

// maxWaitingWrites is how many writes may wait with nothing to send before
// the output forms no more batches: one, ready to go the moment the write
// it waits for ends.
const maxWaitingWrites = 1

// batchPacer counts an output's writes by what they do.
type batchPacer struct {
	// wait is lostBatchWait, shorter in tests.
	wait time.Duration

	mu sync.Mutex
	// starting holds the batches let through that have neither sent nor
	// started to wait (and were not given up for lost); waiting counts the
	// writes with nothing they may send.
	starting map[*pacedWrite]struct{}
	waiting  int
	closed   bool
	// changed is closed, and replaced, whenever a count goes down.
	changed chan struct{}
}

func newBatchPacer() *batchPacer {
	return &batchPacer{wait: lostBatchWait, starting: map[*pacedWrite]struct{}{}, changed: make(chan struct{})}
}

// pacedWrite is one batch let through, in the context of its first message.
type pacedWrite struct {
	p     *batchPacer
	state pacedState
	// tagged is set once the batch's first message carries the write (see
	// batchOrder.number); only the goroutine forming batches reads it.
	tagged bool
}

// pacedState is what a batch let through does.
type pacedState int

const (
	pacedStarting pacedState = iota // not yet sending or waiting
	pacedSending
	pacedWaiting // with nothing it may send
	pacedDone
)

// letThrough returns once the batch before has sent or started to wait and
// fewer than maxWaitingWrites writes wait, with the write of the batch
// about to be formed, for the batch to carry. It runs on the goroutine that
// forms the batches.
func (p *batchPacer) letThrough(ctx context.Context) *pacedWrite {
	timeout := time.NewTimer(p.wait)
	defer timeout.Stop()
	p.mu.Lock()
	defer p.mu.Unlock()
wait:
	for !p.closed && (len(p.starting) > 0 || p.waiting >= maxWaitingWrites) {
		changed := p.changed
		p.mu.Unlock()
		select {
		case <-changed:
			p.mu.Lock()
		case <-timeout.C:
			// The batches let through have not reached their writes for
			// this long: Benthos lost them (it only drops a formed batch
			// when it shuts down). Stop counting them, each alone, so
			// that one reaching its write after all counts for nothing
			// else; keep waiting for the writes that wait: a hot key's
			// writes may take minutes, and letting a batch in every
			// interval would pile them up.
			p.mu.Lock()
			clear(p.starting)
			timeout.Reset(p.wait)
		case <-ctx.Done():
			// Shutting down: the batch goes on, to be written or
			// nacked by Benthos like any other, never dropped here.
			p.mu.Lock()
			break wait
		}
	}
	w := &pacedWrite{p: p}
	p.starting[w] = struct{}{}
	return w
}

// close lets every batch through from now on.
func (p *batchPacer) close() {
	p.mu.Lock()
	p.closed = true
	p.notifyLocked()
	p.mu.Unlock()
}

func (p *batchPacer) notifyLocked() {
	close(p.changed)
	p.changed = make(chan struct{})
}

// of returns the paced write batch carries, or nil if it carries none of p.
func (p *batchPacer) of(batch service.MessageBatch) *pacedWrite {
	if p == nil || len(batch) == 0 {
		return nil
	}
	w, _ := batch[0].Context().Value(p).(*pacedWrite)
	return w
}

// set moves the write to state; a write that is done stays done (Benthos
// may write a batch again after a reconnection).
func (w *pacedWrite) set(state pacedState) {
	p := w.p
	p.mu.Lock()
	defer p.mu.Unlock()
	if w.state == state || w.state == pacedDone {
		return
	}
	switch w.state {
	case pacedStarting:
		// A no-op for a write given up for lost: it counts no more.
		delete(p.starting, w)
	case pacedWaiting:
		p.waiting--
	}
	if state == pacedWaiting {
		p.waiting++
	}
	w.state = state
	p.notifyLocked()
}

// watch is the producer's Reservation.Watch callback.
func (w *pacedWrite) watch(waiting bool) {
	if waiting {
		w.set(pacedWaiting)
	} else {
		w.set(pacedSending)
	}
}

func (w *pacedWrite) done() { w.set(pacedDone) }
