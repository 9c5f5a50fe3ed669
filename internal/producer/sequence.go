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
// Entries are validated before the write enters its keys: an invalid record
// is never sent, so it holds no key, and a write whose records of a key are
// all invalid does not stand between the writes before and after it.
func (r Reservation) Write(ctx context.Context, entries []Entry) []error {
	out := r.p.validate(entries)
	if r.s == nil {
		return r.p.write(ctx, out, nil)
	}
	r.s.holdKeys(entries, out.valid)
	defer r.s.end()
	return r.p.write(ctx, out, r.s)
}

// holdKeys waits for the writes reserved before to enter their keys (which
// they do before sending anything, so this is short), then notes which of
// the keys of its valid entries an earlier write still holds, and holds
// them all.
func (s *sequenced) holdKeys(entries []Entry, valid []int) {
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
	s.keys = make([]string, 0, len(valid))
	for _, i := range valid {
		pk := entries[i].PartitionKey
		w, held := o.last[pk]
		if w == s {
			continue
		}
		if held {
			if s.after == nil {
				s.after = map[string]*sequenced{}
			}
			s.after[pk] = w
		}
		o.last[pk] = s
		s.keys = append(s.keys, pk)
	}
}

// end releases the write's keys and lets the writes waiting for it go. A
// key the write still waited for an earlier write on (it ended before that
// one, without failing the key) is not released but passed on to that
// write, which still holds it; waitingFor follows the same chain for the
// writes already waiting on this one. ended is closed under the lock, so
// that a write found not ended here has not released its keys yet.
func (s *sequenced) end() {
	o := s.order
	o.mu.Lock()
	defer o.mu.Unlock()
	for _, k := range s.keys {
		if o.last[k] != s {
			continue
		}
		if w := s.after[k]; w != nil && !w.hasEnded() {
			o.last[k] = w
			continue
		}
		delete(o.last, k)
	}
	close(s.ended)
}

func (s *sequenced) hasEnded() bool {
	select {
	case <-s.ended:
		return true
	default:
		return false
	}
}

// waitingFor returns the end of an earlier write that still holds key pk,
// or nil when pk is free to send; failed is why that write's record of pk
// failed for good, if it did. An earlier write that ended without resolving
// its own predecessor for pk (see end) passes it on: pk then waits for
// that one.
func (s *sequenced) waitingFor(pk string) (wait <-chan struct{}, failed error) {
	if s == nil || s.after == nil {
		return nil, nil
	}
	w, ok := s.after[pk]
	for ok {
		if !w.hasEnded() {
			s.after[pk] = w
			return w.ended, nil
		}
		if err := w.failed[pk]; err != nil {
			delete(s.after, pk)
			return nil, err
		}
		// w has ended, so its after is no longer written.
		w, ok = w.after[pk]
	}
	delete(s.after, pk)
	return nil, nil
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
