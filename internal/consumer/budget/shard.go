package budget

import (
	"context"
	"errors"
	"math"
	"sync"
	"sync/atomic"

	"github.com/connect-kinesis/connect-kinesis/internal/consumer"
)

// What one shard asks of the budget (budget.go), and what it gives back.
//
// A record costs the budget one measure wherever it is counted (cost): its
// data, partition key and sequence number plus RecordOverhead, counted on
// the user records a Kinesis record becomes (with KPL de-aggregation, every
// user record of an aggregate). So a request is sized, and its answer
// charged, and its batches given back, in the same bytes.
//
// Right before each call that returns records (a GetRecords, or reading a
// subscription's next event) the source reserves room (Reserve) for the
// answer it expects, and gives it back when the call fails (GiveBack): a
// shard whose calls fail, or that waits out a backoff, holds none. The
// estimate:
//   - a polling shard that knows nothing of its records yet, or is behind
//     the tip, asks for the largest answer (10 MiB of its records' data,
//     and at most `limit` records), so a backlog is read at full speed
//     from the first call and a shard that falls behind does not ramp up;
//   - after an empty answer at the tip (idle) it asks for MinAnswerBytes
//     and calls with the full `limit`: that answer holds only what was
//     written since, so an idle shard holds little and a burst is read in
//     one call; let in on part of that room, it asks Kinesis for no more
//     records than the part holds, like any shard;
//   - at the tip with records, twice its last answer (at least
//     MinAnswerBytes, at most the largest);
//   - a subscription waits for its next event holding the room and cannot
//     ask for a smaller event. Just opened (it may start behind the tip:
//     after a take, a break, a pause) or behind the tip, it asks for a
//     full event (fullEvent: a second of what enhanced fan-out pushes per
//     shard, 2 MiB of its records' data, and at most 10,000 records), so
//     a catch-up is not let in on the room of a quiet shard; at the tip it
//     asks for twice its last event (at least MinEventBytes), so quiet
//     subscriptions hold little. An event that holds more than its room
//     (a burst on a quiet subscription, an emulator that pushes a whole
//     backlog in one event) takes the budget over by the difference: one
//     event each, for the subscriptions being read.
//
// No shard asks for more than half the budget unless one of its records
// needs more: on a budget small for its subscriptions, few of them catch
// up at once. A polling source asks Kinesis for no more records than the
// room granted holds at its records' cost (CallLimit): with large records
// and a crowded budget, fewer records per call, at the same pace. The
// answer is charged at its cost in place of the room (Settle) and given
// back batch by batch as the pipeline acks (Release); what the reader
// still holds itself when it ends is given back then (Close), and a batch
// still in the pipeline once its verdict comes.
//
// The bound is exact while a shard's records cost no more than the
// costliest of its previous answer: a record costlier than any before can
// take the budget over by the size of that one answer. One more gap: an
// idle shard let in on all its room calls with the full `limit`, so a
// burst written since its empty answer that costs more than that room
// takes the budget over by the difference, one answer per idle shard.
type Shard struct {
	b     *Budget // nil: no bound
	limit int     // the configured `limit`
	push  bool    // a subscription: an event cannot be asked to be smaller
	// wake ends a wait for room early: the reader has acks or nacks to
	// serve (its tracker's signal).
	wake <-chan struct{}
	// name is "<stream>/<shard>", for the budget's stall report.
	name string

	// Used by the reader's goroutine only (the source's Next runs on it).
	wait     *budgetWait
	holding  bool  // room is reserved for the call under way
	reserved int64 // how much
	// partial says the room reserved is only part of what the shard
	// asked for: the call must ask for no more records than it holds.
	partial bool
	// recCost is the cost of the costliest Kinesis record of the last
	// answer with records (all its user records together), recData the
	// largest data of one; zero until a record was seen.
	recCost, recData int64
	lastAnswer       int64 // the cost of the last answer
	answered         bool  // an answer came
	// behind says the last answer was behind the tip; idle that it was
	// empty and at the tip; fresh that a subscription was just opened and
	// has not pushed an event yet.
	behind, idle, fresh bool

	mu          sync.Mutex
	outstanding int64 // charged and not yet given back
	// inPipeline is the part of outstanding handed to the pipeline and
	// not yet acked or nacked: it stays charged after close.
	inPipeline int64
	closed     bool
	// held mirrors outstanding for the stall report, read without mu;
	// calling mirrors reserved while a call is under way, for the
	// budget's warning.
	held, calling atomic.Int64
	// ended mirrors closed for the stall report: what an ended reader's
	// shard still holds is its batches in the pipeline, and the report
	// names no reader that is gone.
	ended atomic.Bool
}

const (
	// MaxAnswerBytes is the most data one GetRecords answer holds.
	MaxAnswerBytes = 10 << 20
	// MinAnswerBytes is the least a polling shard asks room for;
	// MinEventBytes the least a subscription does.
	MinAnswerBytes = 1 << 20
	MinEventBytes  = 64 << 10
	// FullEventBytes is the data of a full event: what enhanced fan-out
	// pushes per shard in a second. maxEventRecords is the most records
	// an event is taken to hold (kinesis-mock pushes at most that many;
	// Kinesis documents no figure).
	FullEventBytes  = 2 << 20
	maxEventRecords = 10000
	// RecordOverhead approximates what a user record costs beyond its
	// data, key and sequence number: the consumer's and the pipeline's
	// structs around it, the message's metadata, and the indexer that
	// maps an output's per-message errors back to the records (about 200
	// bytes a message).
	RecordOverhead = 1000
	// maxRecordBytes is what a record is assumed to cost before any was
	// seen: Kinesis' default record size limit.
	maxRecordBytes = 1 << 20
)

// ErrServeReader ends a source's wait for room when the reader has acks
// or nacks to serve first: Next returns it, and the reader calls Next
// again once it served them, keeping its place in the queue.
var ErrServeReader = errors.New("the reader has acks to serve")

func NewShard(b *Budget, limit int, push bool, wake <-chan struct{}, name string) *Shard {
	if b != nil {
		b.opened()
	}
	return &Shard{b: b, limit: limit, push: push, wake: wake, name: name}
}

// Cost is what one user record costs the budget, wherever it is counted.
func Cost(r *consumer.Record) int64 {
	return int64(len(r.Data)+len(r.PartitionKey)+len(r.Sequence)) + RecordOverhead
}

// RecordsCost is what user records cost the budget.
func RecordsCost(recs []consumer.Record) int64 {
	var n int64
	for i := range recs {
		n += Cost(&recs[i])
	}
	return n
}

// WhileReading is what an answer whose records cost n holds while it is
// read: the records, and about half their size more for what the records
// codec holds as the body streams in (the window of the record being read,
// the body's other fields: about half the data for records of a few
// hundred bytes, next to nothing for large ones).
func WhileReading(n int64) int64 { return n + n/2 }

// recordsRoom is the cost of records that room reserved by WhileReading
// holds: its inverse.
func recordsRoom(room int64) int64 { return room * 2 / 3 }

// largestAnswer is what the largest answer costs at the shard's record
// sizes: 10 MiB of data, at most `limit` records.
func (s *Shard) largestAnswer() int64 {
	if s.recCost == 0 {
		return MaxAnswerBytes + int64(s.limit)*RecordOverhead
	}
	n := min(int64(s.limit), max(MaxAnswerBytes/max(s.recData, 1), 1))
	return n * s.recCost
}

// fullEvent is what a full event costs at the shard's record sizes:
// FullEventBytes of data, at most maxEventRecords records. Before any
// record was seen, records are taken to be as large as Kinesis allows.
func (s *Shard) fullEvent() int64 {
	n := min(int64(maxEventRecords), max(FullEventBytes/max(s.recData, 1), 1))
	if s.recCost == 0 {
		n = max(FullEventBytes/maxRecordBytes, 1)
	}
	return n * s.recordEstimate()
}

// ask queues for room for the next call, unless already queued or
// granted; the channel is closed once the room is granted.
func (s *Shard) ask() <-chan struct{} {
	if s.wait == nil {
		want, least := s.estimate()
		s.wait = s.b.enqueue(want, least)
	}
	return s.wait.ready
}

// estimate is the room the next call asks for (want), and the least of it
// that will do.
func (s *Shard) estimate() (want, least int64) {
	least = s.recordEstimate()
	var est int64
	switch {
	case s.push && (s.fresh || !s.answered || s.behind):
		est = max(2*s.lastAnswer, s.fullEvent())
	case s.push:
		est = max(2*s.lastAnswer, MinEventBytes)
	case s.idle:
		est = MinAnswerBytes
	case s.answered && !s.behind:
		est = min(max(2*s.lastAnswer, MinAnswerBytes), s.largestAnswer())
	default:
		est = s.largestAnswer()
	}
	// Half the budget at most, so a shard never holds all of it while
	// others wait; a record larger than that still goes ahead (alone when
	// it is larger than the whole budget).
	halfOr := max(s.b.capacity/2, WhileReading(least))
	if s.push {
		// An event cannot be asked to be smaller: part of the room would
		// not do. Its estimate counts its records' sizes already.
		want = min(WhileReading(est), halfOr)
		return want, want
	}
	return min(WhileReading(max(est, least)), halfOr), WhileReading(least)
}

// Subscribed says the source opened a subscription: its first event may
// carry whatever was written since the last one it read, so the next
// reservation is for a full event. A request already queued is resized in
// place, keeping its place in the queue.
func (s *Shard) Subscribed() {
	if s == nil || !s.push {
		return
	}
	s.fresh = true
	if s.b != nil && s.wait != nil {
		s.b.resize(s.wait, s.estimate)
	}
}

// recordEstimate is what the shard's costliest record is taken to cost:
// as seen in its last answer with records, else Kinesis' largest record.
func (s *Shard) recordEstimate() int64 {
	if s.recCost == 0 {
		return maxRecordBytes
	}
	return s.recCost
}

// Reserve waits for room for the next call that returns records, unless
// the source holds it already. It returns ErrServeReader when the reader
// has acks or nacks to serve first, or ctx's error.
func (s *Shard) Reserve(ctx context.Context) error {
	if s == nil || s.b == nil || s.holding {
		return nil
	}
	ready := s.ask()
	select {
	case <-ready:
	default:
		select {
		case <-ready:
		case <-s.wake:
			return ErrServeReader
		case <-ctx.Done():
			return ctx.Err()
		}
	}
	s.reserved, s.holding, s.partial, s.wait = s.wait.granted, true, s.wait.granted < s.wait.want, nil
	s.calling.Store(s.reserved)
	s.mu.Lock()
	s.add(s.reserved)
	s.mu.Unlock()
	return nil
}

// GiveBack returns the room reserved: the call failed, or the source will
// wait before it calls again. It keeps no place in the queue.
func (s *Shard) GiveBack() {
	if s == nil || s.b == nil || !s.holding {
		return
	}
	n := s.reserved
	s.reserved, s.holding = 0, false
	s.calling.Store(0)
	s.mu.Lock()
	defer s.mu.Unlock()
	if !s.closed {
		s.add(-n)
		s.b.giveBack(n)
	}
}

// add changes outstanding by n; under mu.
func (s *Shard) add(n int64) {
	s.outstanding += n
	s.held.Store(s.outstanding)
	if s.b != nil {
		s.b.hold(s, s.outstanding > 0)
	}
}

// CallLimit is the Limit of the GetRecords under way: `limit`, or fewer
// records when the room granted holds fewer of the shard's records.
func (s *Shard) CallLimit() int32 {
	if s == nil {
		return math.MaxInt32
	}
	if s.b == nil || !s.holding || (s.idle && !s.partial) {
		// An answer after an empty one at the tip holds only what was
		// written since: the full `limit`, so a burst is read in one call.
		// Let in on part of its room, the shard asks for what that part
		// holds like any other: the burst would take the budget over its
		// bound by what the part lacks.
		return int32(s.limit)
	}
	room := recordsRoom(s.reserved)
	if room >= s.largestAnswer() {
		return int32(s.limit) // any answer fits
	}
	n := room / s.recordEstimate()
	return int32(min(max(n, 1), int64(s.limit)))
}

// Push says the shard reads a subscription, whose events cannot be asked
// to be smaller.
func (s *Shard) Push() bool { return s != nil && s.push }
