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
// So the processor that ends the output's batching, kinesis_batch_order
// (batchorder.go), holds the next batch back before it numbers it (and with
// it the batching, and the input behind it) while the batch before it has
// not yet sent or started to wait, or while maxWaitingWrites writes already
// wait with nothing they may send. Batches whose keys do not collide never
// wait, so they still go max_in_flight at once; batches that would only
// wait are not formed until a write ends. Pacing and numbering are one
// processor, not two: Benthos wraps every processor's call in a span per
// message, which at 500 messages a batch costs more than either does.

// maxWaitingWrites is how many writes may wait with nothing to send before
// the output forms no more batches: one, ready to go the moment the write
// it waits for ends.
const maxWaitingWrites = 1

// pacingWait bounds how long a batch is held back for one let through
// before it that has not yet reached its write: Benthos only loses a formed
// batch on its way to the writers when it shuts down, so the output cannot
// stall on it.
const pacingWait = 10 * time.Second

// batchPacer counts an output's writes by what they do.
type batchPacer struct {
	// wait is pacingWait, shorter in tests.
	wait time.Duration

	mu sync.Mutex
	// starting counts the batches let through that have neither sent nor
	// started to wait; waiting the writes with nothing they may send.
	starting, waiting int
	closed            bool
	// changed is closed, and replaced, whenever a count goes down.
	changed chan struct{}
}

func newBatchPacer() *batchPacer {
	return &batchPacer{wait: pacingWait, changed: make(chan struct{})}
}

// pacedWrite is one batch let through, in the context of its first message.
type pacedWrite struct {
	p     *batchPacer
	state int
}

// States of a pacedWrite.
const (
	pacedStarting = iota
	pacedSending
	pacedWaiting
	pacedDone
)

// admit returns once the batch before has sent or started to wait and
// fewer than maxWaitingWrites writes wait, and tags batch so its write
// reports what it does. It runs on the goroutine that forms the batches.
func (p *batchPacer) admit(ctx context.Context, batch service.MessageBatch) {
	if len(batch) == 0 {
		return
	}
	timeout := time.NewTimer(p.wait)
	defer timeout.Stop()
	p.mu.Lock()
wait:
	for !p.closed && (p.starting > 0 || p.waiting >= maxWaitingWrites) {
		changed := p.changed
		p.mu.Unlock()
		select {
		case <-changed:
			p.mu.Lock()
		case <-timeout.C:
			// A batch let through has not reached its write for this
			// long: Benthos lost it (it only drops a formed batch when
			// it shuts down). Stop counting it, but keep waiting for
			// the writes that wait: a hot key's writes may take
			// minutes, and letting a batch in every interval would
			// pile them up.
			p.mu.Lock()
			p.starting = 0
			timeout.Reset(p.wait)
		case <-ctx.Done():
			// Shutting down: the batch goes on, to be written or
			// nacked by Benthos like any other, never dropped here.
			p.mu.Lock()
			break wait
		}
	}
	p.starting++
	p.mu.Unlock()
	w := &pacedWrite{p: p}
	batch[0] = batch[0].WithContext(context.WithValue(batch[0].Context(), p, w))
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

// of returns the paced write of batch, or nil if it was not let through by p.
func (p *batchPacer) of(batch service.MessageBatch) *pacedWrite {
	if p == nil || len(batch) == 0 {
		return nil
	}
	w, _ := batch[0].Context().Value(p).(*pacedWrite)
	return w
}

// set moves the write to state; a write that is done stays done (Benthos
// may write a batch again after a reconnection).
func (w *pacedWrite) set(state int) {
	p := w.p
	p.mu.Lock()
	defer p.mu.Unlock()
	if w.state == state || w.state == pacedDone {
		return
	}
	switch w.state {
	case pacedStarting:
		p.starting = max(0, p.starting-1)
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
