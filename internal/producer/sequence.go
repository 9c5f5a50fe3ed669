package producer

import (
	"context"
	"sync"
)

// Ordered writes may overlap: while one write waits for its round trips,
// the next ones already send the records that cannot overtake anything. The
// rule that keeps each partition key in order across them is per key:
//
//   - every ordered write takes its place in the order when it begins
//     (Reserve), before its entries are even known, so the order is the
//     order in which writes began, whatever each spends preparing them;
//   - a record whose key an earlier, unfinished write also holds is not sent
//     before that write has ended (every record of it landed or failed for
//     good); records of other keys go at once;
//   - if a record of that key failed for good in the earlier write, the
//     record fails too, unsent (ErrEarlierRecordFailed), as the later
//     records of the key in the same write do, so that nothing of the key
//     that was in flight with it lands before its replay;
//   - within a write, rounds keep the order as before (see writeOrdered).
//
// Two requests in flight never hold the same key, so neither a partial
// failure, a retry, a cut connection nor a reshard can let a key's later
// record land before an earlier one. A write that begins after the failed
// one has ended is not held back: its order against the failed record is
// the replay's.

// keyOrder is the producer's book of which ordered write holds which
// partition keys.
type keyOrder struct {
	mu sync.Mutex
	// last maps a key to the latest write that holds records of it and has
	// not ended.
	last map[string]*sequenced
	// tail is closed when the latest reservation has entered its keys.
	tail chan struct{}
}

// sequenced is one ordered write's place in the order.
type sequenced struct {
	order *keyOrder
	// prev is closed when the write reserved before this one has entered
	// its keys; entered is this write's.
	prev, entered chan struct{}
	// after maps each of the write's keys held by an earlier write to that
	// write.
	after map[string]*sequenced
	keys  []string
	// failed holds the keys whose records failed for good in this write,
	// and why; it is complete when ended is closed.
	failed map[string]error
	// ended is closed when the write has ended.
	ended chan struct{}
	// watch, if set, is told when the write starts to wait with nothing
	// it may send, and when it sends again (see Reservation.Watch);
	// waiting is what it was told last.
	watch   func(waiting bool)
	told    bool
	waiting bool
}

// Reservation is an ordered write's place, taken before its entries are
// ready; see Producer.Reserve.
type Reservation struct {
	p *Producer
	s *sequenced
}

// Reserve takes the next place in the order of an ordered producer's
// writes. The records of a partition key land in the order of the places:
// a caller that receives batches in order reserves as soon as it has a
// batch, then prepares the entries (interpolation, validation) while the
// writes before it are in flight. Write must then be called exactly once
// (with no entries if nothing is left to write), or later writes wait
// forever. An unordered producer's reservations do nothing, and neither do
// those of a SingleWriter one, whose writes never overlap.
func (p *Producer) Reserve() Reservation {
	if !p.conf.Ordered || p.conf.SingleWriter {
		return Reservation{p: p}
	}
	o := &p.order
	o.mu.Lock()
	defer o.mu.Unlock()
	s := &sequenced{order: o, prev: o.tail, entered: make(chan struct{}), ended: make(chan struct{})}
	o.tail = s.entered
	return Reservation{p, s}
}

// Watch has fn told what the write does, for a caller that paces how many
// writes it starts: fn(true) when a round of the write finds nothing it may
// send (every record left waits for an earlier write to end), fn(false)
// when it sends a round, the first or after a wait. fn is only told of a
// change, on the write's goroutine, and never after Write returns. Only
// overlapping ordered writes can wait; other reservations ignore fn.
func (r Reservation) Watch(fn func(waiting bool)) Reservation {
	if r.s != nil {
		r.s.watch = fn
	}
	return r
}

// tell tells the watch, if any, whether the write now waits.
func (s *sequenced) tell(waiting bool) {
	if s == nil || s.watch == nil || (s.told && s.waiting == waiting) {
		return
	}
	s.told, s.waiting = true, waiting
	s.watch(waiting)
}

// Write writes entries in the reservation's place; see Producer.Write.
func (r Reservation) Write(ctx context.Context, entries []Entry) []error {
	if r.s == nil {
		return r.p.write(ctx, entries, nil)
	}
	r.s.enter(entries)
	defer r.s.end()
	return r.p.write(ctx, entries, r.s)
}

// enter waits for the writes reserved before to enter their keys (which
// they do before sending anything, so this is short), then notes which of
// its keys an earlier write still holds, and holds them all.
func (s *sequenced) enter(entries []Entry) {
	if s.prev != nil {
		<-s.prev
	}
	o := s.order
	o.mu.Lock()
	defer o.mu.Unlock()
	defer close(s.entered)
	if o.last == nil {
		o.last = map[string]*sequenced{}
	}
	s.keys = make([]string, 0, len(entries))
	for _, e := range entries {
		w, held := o.last[e.PartitionKey]
		if w == s {
			continue
		}
		if held {
			if s.after == nil {
				s.after = map[string]*sequenced{}
			}
			s.after[e.PartitionKey] = w
		}
		o.last[e.PartitionKey] = s
		s.keys = append(s.keys, e.PartitionKey)
	}
}

// end releases the write's keys and lets the writes waiting for it go.
func (s *sequenced) end() {
	o := s.order
	o.mu.Lock()
	for _, k := range s.keys {
		if o.last[k] == s {
			delete(o.last, k)
		}
	}
	o.mu.Unlock()
	close(s.ended)
}

// waitingFor returns the end of an earlier write that still holds key pk,
// or nil when pk is free to send; failed is why that write's record of pk
// failed for good, if it did.
func (s *sequenced) waitingFor(pk string) (wait <-chan struct{}, failed error) {
	if s == nil || s.after == nil {
		return nil, nil
	}
	w, ok := s.after[pk]
	if !ok {
		return nil, nil
	}
	select {
	case <-w.ended:
		delete(s.after, pk)
		return nil, w.failed[pk]
	default:
		return w.ended, nil
	}
}

// noteFailed records the keys that failed for good in one pass of the
// write, for the writes waiting on it.
func (s *sequenced) noteFailed(failed map[string]error) {
	if s == nil || len(failed) == 0 {
		return
	}
	if s.failed == nil {
		s.failed = make(map[string]error, len(failed))
	}
	for k, err := range failed {
		if _, ok := s.failed[k]; !ok {
			s.failed[k] = err
		}
	}
}
