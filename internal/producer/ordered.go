package producer

import (
	"context"
	"errors"
	"fmt"
)

// ErrEarlierRecordFailed is wrapped by the error of a record an ordered
// producer did not send because an earlier record of its partition key in
// the same write failed for good: sending it would have put it before that
// one.
var ErrEarlierRecordFailed = errors.New("not sent: an earlier message with the same partition key failed")

// writeOrdered sends recs keeping each partition key's order. Records are
// grouped by the shard they are predicted to land on (a lane), and sent in
// rounds. Each round takes from every lane the next records that may travel
// together, packs them into as few requests as the PutRecords limits allow
// (records of several shards share a request, as a request's cost is mostly
// per request, not per record), sends the requests in parallel, up to
// MaxInFlight, and waits for them:
//
//   - a round holds each partition key at most once (in one record, plain or
//     aggregate), so a partial failure can never let a later record of a key
//     land before an earlier one that was refused;
//   - a request's refused records are retried before the next round;
//   - a record that fails for good fails the later records of the same keys
//     unsent (ErrEarlierRecordFailed), so a replay of the failed messages
//     comes first.
//
// When an aggregate lands on a shard that does not hold all its members, its
// lane's shard was split or merged: the aggregate's members and everything
// not sent yet are returned, to be grouped anew by the fresh map and sent
// after what has landed.
//
// Records whose key an earlier write still holds (seq, see sequence.go) are
// passed over like a clash until that write ends; when nothing else is left
// to send, the write waits for it.
func (p *Producer) writeOrdered(ctx context.Context, recs *records, seq *sequenced, fail func(int, error)) []int {
	w := &orderedWrite{remaining: recs.len(), recs: recs, seq: seq, fail: fail, lanes: lanesOf(recs)}
	for _, q := range w.lanes {
		w.total += recs.keysIn(q)
	}
	defer func() { seq.noteFailed(w.failed) }()
	for first := true; ; first = false {
		requests := w.round()
		if first {
			p.noteKeyWaits(recs, w)
		}
		if len(requests) == 0 {
			if len(w.lanes) == 0 {
				return nil
			}
			// Every record left waits for an earlier write.
			seq.tell(true)
			select {
			case <-w.wait:
				continue
			case <-ctx.Done():
				w.failLanes(ctx.Err())
				return nil
			}
		}
		seq.tell(false)
		results, sentAll := p.sendAll(ctx, requests, fail)
		var resend []int
		for _, res := range results {
			for k := range res.failed.len() {
				w.markFailed(&res.failed, k, res.err)
			}
			resend = append(resend, res.resend...)
		}
		if !sentAll {
			// The context ended: what was not sent, or has to be sent
			// again, fails with it.
			for _, i := range resend {
				fail(i, ctx.Err())
				w.markKeyFailed(recs.src[i].PartitionKey, ctx.Err())
			}
			w.failLanes(ctx.Err())
			return nil
		}
		if len(resend) > 0 {
			for _, q := range w.lanes {
				for _, k := range q {
					if !w.failAfter(k) {
						recs.each(k, func(i int) { resend = append(resend, i) })
					}
				}
			}
			return resend
		}
	}
}

// lanesOf groups the records by the shard they are predicted to land on,
// each lane in record order. Records of no known shard share a lane.
func lanesOf(recs *records) [][]int {
	if recs.lane == nil {
		all := make([]int, recs.len())
		for k := range all {
			all[k] = k
		}
		return [][]int{all}
	}
	return groupByLane(recs.lane, recs.shards.Len())
}

// orderedWrite is the state of one ordered write.
type orderedWrite struct {
	recs *records
	// lanes holds, per shard, the records not sent yet, in order;
	// remaining counts them.
	lanes     [][]int
	remaining int
	// total is the user records of the write; heldRecords counts those a
	// round passed over because an earlier write held their key.
	total, heldRecords int
	// takes is, during a round, the records each lane gives it; backing
	// holds them, sized by the first round and reused.
	takes   [][]int
	backing []int
	// failed maps the partition keys whose records failed for good to why.
	failed map[string]error
	fail   func(int, error)
	// seq is the write's place among overlapping ordered writes; wait is,
	// after a round, the end of an earlier write one of the records passed
	// over waits for (nil if none).
	seq  *sequenced
	wait <-chan struct{}
	// roundKeys marks each partition key a round has met, taken or
	// passed over; it is cleared and reused every round. A key belongs to
	// one lane, so the lanes share it. When lanes are picked in parallel,
	// each worker has its own, cleared lane after lane.
	roundKeys    roundKeys
	keysByWorker []roundKeys
}

// keys calls fn with the partition key of every entry record k of r
// carries, until fn returns false.
func keys(r *records, k int, fn func(string) bool) {
	if r.members == nil || r.members[k] == nil {
		fn(r.src[r.index[k]].PartitionKey)
		return
	}
	for _, i := range r.members[k] {
		if !fn(r.src[i].PartitionKey) {
			return
		}
	}
}

// failAfter fails record k unsent if an earlier record of one of its keys
// failed for good, and reports whether it did. Its keys then count as failed
// too, so the records after it wait for a replay as well.
func (w *orderedWrite) failAfter(k int) bool {
	if len(w.failed) == 0 {
		return false
	}
	var cause error
	var key string
	keys(w.recs, k, func(pk string) bool {
		if err, ok := w.failed[pk]; ok {
			cause, key = err, pk
			return false
		}
		return true
	})
	if cause == nil {
		return false
	}
	err := fmt.Errorf("%w (partition key %q): %w", ErrEarlierRecordFailed, truncate(key, 64), cause)
	w.markFailed(w.recs, k, err)
	w.recs.each(k, func(i int) { w.fail(i, err) })
	return true
}

// markFailed notes the keys of record k of r as failed for good with err.
func (w *orderedWrite) markFailed(r *records, k int, err error) {
	keys(r, k, func(pk string) bool {
		w.markKeyFailed(pk, err)
		return true
	})
}

// markKeyFailed notes partition key pk as failed for good with err, unless
// it already failed.
func (w *orderedWrite) markKeyFailed(pk string, err error) {
	if w.failed == nil {
		w.failed = map[string]error{}
	}
	if _, ok := w.failed[pk]; !ok {
		w.failed[pk] = err
	}
}

// failLanes fails every record left in the lanes with err (the write's
// context ended) and notes their keys as failed, so that the later writes
// waiting for this one fail their records of those keys unsent rather than
// land them before a replay of these.
func (w *orderedWrite) failLanes(err error) {
	for _, q := range w.lanes {
		for _, k := range q {
			w.markFailed(w.recs, k, err)
			w.recs.each(k, func(i int) { w.fail(i, err) })
		}
	}
	w.lanes = nil
}
