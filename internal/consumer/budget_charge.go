package consumer

import "github.com/aws/aws-sdk-go-v2/service/kinesis/types"

// A shard's charges in the byte budget (budget_shard.go asks for room):
// an answer is charged at the cost of its user records in place of its
// room (settle), a batch's charge follows it into the pipeline
// (handedOver) and back (returned), and is given back when it is acked
// (release); close gives back what the reader holds itself when it ends.

// settle charges the call under way at the cost of the user records its
// answer gave (recs, converted from raw), in place of the room reserved,
// and learns the shard's record sizes and whether it is at the tip.
func (s *shardBudget) settle(recs []Record, raw []types.Record, behind int64) {
	if s == nil {
		return
	}
	s.learn(recs, raw, behind)
	if s.b == nil {
		return
	}
	delta := s.lastAnswer - s.reserved
	s.reserved, s.holding = 0, false
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
func (s *shardBudget) learn(recs []Record, raw []types.Record, behind int64) {
	var total, costliest, run int64
	for i := range recs {
		c := cost(&recs[i])
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
	s.behind, s.idle = behind > 0, behind == 0 && len(raw) == 0
}

// handedOver notes a batch handed to the pipeline: its records stay
// charged until its verdict, even after the reader ends. The pipeline may
// ack the batch before handedOver runs (the send returns before this
// call); the batch then is already given back and nothing is counted.
func (s *shardBudget) handedOver(b *Batch) {
	if s == nil || s.b == nil {
		return
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		// Handed over as the reader ended (a lane's send racing the
		// stop): close gave its room back already, so its ack gives
		// back nothing.
		b.charge.Store(0)
		return
	}
	if !b.inPipeline {
		b.inPipeline = true
		s.inPipeline += b.charge.Load()
	}
}

// leftPipeline takes b, whose charge is n, out of inPipeline when it
// was counted there; under mu.
func (s *shardBudget) leftPipeline(b *Batch, n int64) {
	if b.inPipeline {
		b.inPipeline = false
		s.inPipeline -= n
	}
}

// returned notes a batch back from the pipeline unacked (nacked, or
// refused past the lease's deadline). The reader holds it again to send
// it again; once the reader has ended nobody will, so its room is given
// back.
func (s *shardBudget) returned(b *Batch) {
	if s == nil || s.b == nil {
		return
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if !s.closed {
		s.leftPipeline(b, b.charge.Load())
		return
	}
	n := b.charge.Swap(0)
	s.leftPipeline(b, n)
	s.add(-n)
	s.b.giveBack(n)
}

// release gives back the cost of a batch the pipeline acked, also after
// the reader ended; only once, whatever the number of acks.
func (s *shardBudget) release(b *Batch) {
	if s == nil || s.b == nil {
		return
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	n := b.charge.Swap(0)
	s.leftPipeline(b, n)
	if n == 0 {
		return
	}
	s.add(-n)
	s.b.giveBack(n)
}

// close gives back everything the shard still holds but the batches in
// the pipeline (given back as they are acked or nacked), and its place in
// the queue.
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
	n := s.outstanding - s.inPipeline
	s.add(-n)
	s.b.giveBack(n)
}
