package consumer

import (
	"sync"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/kinesis/types"
)

// What one shard asks of the budget (budget.go), and what it gives back.
//
// Before each fetch the reader asks for room for the answer it expects
// (ask, take): before its first answer, room for the largest (10 MiB and
// `limit` records); then twice its last answer (so a shard falling behind
// doubles its answers call by call up to the largest), at least
// minAnswerBytes, and no more than `limit` of its largest recent record. A
// subscription, which waits for its next event holding that room and
// cannot ask for a smaller event, asks for twice its last event (at least
// minEventBytes), so quiet subscriptions hold little; a burst on many quiet
// subscriptions at once can take the budget over by one event each (at
// most what enhanced fan-out pushes per shard, 2 MiB/s). A polling source then
// asks Kinesis for no more records than the room granted holds at that
// record size (callLimit): with large records and a crowded budget, fewer
// records per call, at the same pace. The answer, once converted into user
// records, is charged at its own size (settle) and given back batch by
// batch as the pipeline acks (release); whatever the reader still holds
// when it ends is given back then (close).
//
// The bound is exact while a shard's records are no larger than the
// largest of its previous answer: a record larger than any before can take
// the budget over by the size of that one answer.
type shardBudget struct {
	b     *budget // nil: no bound
	limit int     // the configured `limit`
	push  bool    // a subscription: an event cannot be asked to be smaller

	// Used by the reader's goroutine only (the source's Next runs on it).
	wait       *budgetWait
	reserved   int64 // granted for the fetch under way
	recEst     int64 // the cost of the largest record of the last answer with records
	lastAnswer int64
	seen       bool // an answer came

	mu          sync.Mutex
	outstanding int64 // charged and not yet given back
	closed      bool
}

const (
	// maxAnswerBytes is the most data one GetRecords answer holds.
	maxAnswerBytes = 10 << 20
	// minAnswerBytes is the least a polling shard asks room for;
	// minEventBytes the least a subscription does.
	minAnswerBytes = 1 << 20
	minEventBytes  = 64 << 10
	// recordOverhead approximates what a record costs beyond its data,
	// key and sequence number: the consumer's and the pipeline's structs
	// around it, and the message's metadata.
	recordOverhead = 768
	// maxRecordBytes is what a record is assumed to cost before any was
	// seen: Kinesis' default record size limit.
	maxRecordBytes = 1 << 20
)

func newShardBudget(b *budget, limit int, push bool) *shardBudget {
	return &shardBudget{b: b, limit: limit, push: push, recEst: maxRecordBytes}
}

// inFlight is what an answer of decoded bytes costs while it is read: the
// decoded records, and the part of its JSON body the decoder holds.
func inFlight(decoded int64) int64 { return decoded + decoded*bodyNum/bodyDen }

// decodedOf is the decoded bytes an in-flight grant holds: the inverse of
// inFlight.
func decodedOf(granted int64) int64 { return granted * bodyDen / (bodyDen + bodyNum) }

// bodyNum/bodyDen is what reading an answer holds next to its decoded
// records: the records codec decodes as the body streams in, holding the
// window of the record being read and the body's other fields (keys,
// sequence numbers), about half the data for records of a few hundred
// bytes and next to nothing for large ones.
const bodyNum, bodyDen = 1, 2

// ask queues for room for the next fetch, unless already queued or
// granted; the channel is closed once the room is granted.
func (s *shardBudget) ask() <-chan struct{} {
	if s == nil || s.b == nil {
		return closedChan
	}
	if s.wait == nil {
		est := max(2*s.lastAnswer, minAnswerBytes)
		least := s.recEst
		switch {
		case s.push:
			// A subscription waits for its event holding its room, and
			// cannot ask for a smaller one: it asks for twice its last
			// event, little while it is quiet.
			est = max(2*s.lastAnswer, minEventBytes)
			least = est
		case !s.seen:
			// Nothing is known of the shard yet: room for the largest
			// answer, so a backlog is read at full speed from the first
			// call.
			est = maxAnswerBytes + int64(s.limit)*recordOverhead
		default:
			est = min(est, max(int64(s.limit)*s.recEst, minAnswerBytes), maxAnswerBytes+int64(s.limit)*recordOverhead)
		}
		// More than the whole budget is never granted while anything else
		// is held, so asking for it would only make the shard wait for the
		// input to drain; a record larger than the budget still goes
		// ahead alone.
		want := min(inFlight(max(est, least)), max(s.b.capacity, inFlight(least)))
		s.wait = s.b.enqueue(want, inFlight(least))
	}
	return s.wait.ready
}

var closedChan = func() chan struct{} { c := make(chan struct{}); close(c); return c }()

// take turns the grant that ask's channel announced into the reservation
// of the fetch under way.
func (s *shardBudget) take() {
	if s == nil || s.b == nil || s.wait == nil {
		return
	}
	s.reserved = s.wait.granted
	s.wait = nil
	s.mu.Lock()
	s.outstanding += s.reserved
	s.mu.Unlock()
}

// callLimit is the Limit of the GetRecords under way: `limit`, or fewer
// records when the room granted holds fewer of the shard's records.
func (s *shardBudget) callLimit() int32 {
	if s == nil || s.b == nil || s.reserved == 0 {
		return int32(s.limit)
	}
	room := decodedOf(s.reserved)
	if room >= maxAnswerBytes+int64(s.limit)*recordOverhead {
		return int32(s.limit) // any answer fits
	}
	n := room / s.recEst
	return int32(min(max(n, 1), int64(s.limit)))
}

// observe learns the size of the shard's records from a raw answer.
func (s *shardBudget) observe(recs []types.Record) {
	var largest, total int64
	for i := range recs {
		c := rawCost(&recs[i])
		largest = max(largest, c)
		total += c
	}
	if len(recs) > 0 {
		s.recEst = largest
	}
	s.lastAnswer, s.seen = total, true
}

// settle charges the fetch under way at the cost of the records it gave
// (none if it failed), in place of its reservation.
func (s *shardBudget) settle(recs []Record) {
	if s == nil || s.b == nil {
		return
	}
	delta := recordsCost(recs) - s.reserved
	s.reserved = 0
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return
	}
	s.outstanding += delta
	s.b.add(delta)
}

// release gives back the cost of records the pipeline acked.
func (s *shardBudget) release(n int64) {
	if s == nil || s.b == nil || n == 0 {
		return
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return
	}
	s.outstanding -= n
	s.b.add(-n)
}

// close gives back everything the shard still holds, and its place in the
// queue; later releases are no-ops.
func (s *shardBudget) close() {
	if s == nil || s.b == nil {
		return
	}
	if s.wait != nil {
		s.b.cancel(s.wait)
		s.wait = nil
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return
	}
	s.closed = true
	s.b.add(-s.outstanding)
	s.outstanding = 0
}

// recordsCost is what user records cost the budget.
func recordsCost(recs []Record) int64 {
	var n int64
	for i := range recs {
		n += int64(len(recs[i].Data)+len(recs[i].PartitionKey)+len(recs[i].Sequence)) + recordOverhead
	}
	return n
}

// rawCost is what one Kinesis record costs the budget.
func rawCost(r *types.Record) int64 {
	return int64(len(r.Data)+len(aws.ToString(r.PartitionKey))+len(aws.ToString(r.SequenceNumber))) + recordOverhead
}
