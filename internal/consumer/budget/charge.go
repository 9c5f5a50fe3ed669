package budget

import (
	"sync/atomic"

	"github.com/aws/aws-sdk-go-v2/service/kinesis/types"
	"github.com/connect-kinesis/connect-kinesis/internal/consumer"
)

// Charge is what the records of one batch cost the budget, given back
// once, when the batch is acked. The reader keeps one with each batch it
// hands to the pipeline.
type Charge struct {
	n atomic.Int64
	// inPipeline says n is counted in the shard's budget as handed to
	// the pipeline; guarded by that Shard's mu.
	inPipeline bool
}

// Set records what the batch's records cost (RecordsCost).
func (c *Charge) Set(n int64) { c.n.Store(n) }

// A shard's charges in the byte budget (shard.go asks for room):
// an answer is charged at the cost of its user records in place of its
// room (Settle), a batch's charge follows it into the pipeline
// (HandedOver) and back (Returned), and is given back when it is acked
// (Release); close gives back what the reader holds itself when it ends.

// Settle charges the call under way at the cost of the user records its
// answer gave (recs, converted from raw), in place of the room reserved,
// and learns the shard's record sizes and whether it is at the tip.
func (s *Shard) Settle(recs []consumer.Record, raw []types.Record, behind int64) {
	if s == nil {
		return
	}
	s.learn(recs, raw, behind)
	if s.b == nil {
		return
	}
	delta := s.lastAnswer - s.reserved
	s.reserved, s.holding = 0, false
	s.calling.Store(0)
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return
	}
	s.add(delta)
	if delta > 0 {
		s.b.charge(delta)
	} else {
		s.b.giveBack(-delta)
	}
}

// learn notes what the answer's Kinesis records cost: the user records of
// one Kinesis record share its sequence number.
func (s *Shard) learn(recs []consumer.Record, raw []types.Record, behind int64) {
	var total, costliest, run int64
	for i := range recs {
		c := Cost(&recs[i])
		total += c
		if i > 0 && recs[i].Sequence != recs[i-1].Sequence {
			run = 0
		}
		run += c
		costliest = max(costliest, run)
	}
	var largest int64
	for i := range raw {
		largest = max(largest, int64(len(raw[i].Data)))
	}
	if len(recs) > 0 {
		s.recCost, s.recData = costliest, largest
	}
	s.lastAnswer, s.answered = total, true
	s.behind, s.idle, s.fresh = behind > 0, behind == 0 && len(raw) == 0, false
}

// HandedOver notes a batch about to be handed to the pipeline: its records
// stay charged until its verdict, even after the reader ends. The reader
// calls it before the send, so that no verdict (an ack, a nack, a refusal
// by Admit) can come before it, and calls Returned when the send does not
// happen after all.
func (s *Shard) HandedOver(b *Charge) {
	if s == nil || s.b == nil {
		return
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		// Handed over as the reader ended (a lane's send racing the
		// stop): close gave its room back already, so its ack gives
		// back nothing.
		b.n.Store(0)
		return
	}
	if !b.inPipeline {
		b.inPipeline = true
		s.inPipeline += b.n.Load()
	}
}

// leftPipeline takes b, whose charge is n, out of inPipeline when it
// was counted there; under mu.
func (s *Shard) leftPipeline(b *Charge, n int64) {
	if b.inPipeline {
		b.inPipeline = false
		s.inPipeline -= n
	}
}

// Returned notes a batch back from the pipeline unacked (nacked, refused
// by Admit), or not sent after HandedOver. The reader holds it again to
// send it again; once the reader has ended nobody will, so its room is
// given back, unless Close gave it back already: a batch that was not in
// the pipeline when the reader ended.
func (s *Shard) Returned(b *Charge) {
	if s == nil || s.b == nil {
		return
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if !s.closed {
		s.leftPipeline(b, b.n.Load())
		return
	}
	n := b.n.Swap(0)
	if !b.inPipeline {
		return // Close counted it as the reader's, and gave it back
	}
	s.leftPipeline(b, n)
	s.giveBackHeld(n, false)
}

// Release gives back the cost of a batch the pipeline acked, also after
// the reader ended; only once, whatever the number of acks.
func (s *Shard) Release(b *Charge) {
	if s == nil || s.b == nil {
		return
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	n := b.n.Swap(0)
	inPipeline := b.inPipeline
	s.leftPipeline(b, n)
	if n == 0 || (s.closed && !inPipeline) {
		// Close gave back what the reader held itself: a batch it was
		// still sending again in parts when it ended.
		return
	}
	s.giveBackHeld(n, false)
}

// Close gives back everything the shard still holds but the batches in
// the pipeline (given back as they are acked or nacked), and its place in
// the queue. What the reader holds itself includes every batch that came
// back unacked (nacked or refused, waiting to be sent again): no verdict
// will come for those.
func (s *Shard) Close() {
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
	s.ended.Store(true)
	s.calling.Store(0)
	s.giveBackHeld(closeGivesBack(s.outstanding-s.inPipeline), true)
}

// giveBackHeld gives back n of what the shard holds, under mu; closing
// says the shard closes with it. The budget notes in the same step whether
// the shard still holds room, so its check that nothing is held once no
// reader holds anything (Budget.checkLocked) never sees one without the
// other.
func (s *Shard) giveBackHeld(n int64, closing bool) {
	s.outstanding -= n
	s.held.Store(s.outstanding)
	s.b.giveBackFrom(s, n, s.outstanding > 0, closing)
}
