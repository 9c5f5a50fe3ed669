package producer

import (
	"context"
	"errors"
	"fmt"
	"slices"

	"github.com/connect-kinesis/connect-kinesis/internal/kinesisx"
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
	// total is the user records of the write; heldBack counts those a
	// round passed over because an earlier write held their key.
	total, heldBack int
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
	// seen marks the partition keys a round has taken (false) or passed
	// over (true); it is cleared and reused every round. A key belongs to
	// one lane, so the lanes share it. When lanes are picked in parallel,
	// each worker has its own, cleared lane after lane.
	seen      map[string]bool
	seenByRun []map[string]bool
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

// round takes the next records of every lane and packs them into requests.
// A lane gives the records, in order, that share no partition key with a
// record taken or passed over before them, so no key overtakes itself, and
// have no key an earlier write still holds; the rest stay in the lane. The
// lanes' records are then packed in lane order into requests filled up to
// the PutRecords limits. A lane may give more than one request's worth: a
// round holds each key once however many requests it takes, so a large
// write (a batch sized to the stream's shards) goes out in one round trip
// rather than one request per shard per round trip.
func (w *orderedWrite) round() []records {
	w.wait = nil
	w.pick()
	var (
		requests []records
		req      records
		bytes    int
		left     int // records of the round not packed yet
	)
	for _, take := range w.takes {
		left += len(take)
	}
	for _, take := range w.takes {
		w.remaining -= len(take)
		for _, k := range take {
			size := w.recs.size(k)
			if req.len() == kinesisx.MaxPutRecordsCount || (req.len() > 0 && bytes+size > kinesisx.MaxPutRecordsBytes) {
				requests = append(requests, req)
				req, bytes = records{}, 0
			}
			if req.entries == nil {
				// Room for this round's records, not the write's: a
				// round of a hot key's write holds each key once.
				req = w.recs.withCap(min(left, kinesisx.MaxPutRecordsCount))
			}
			req.push(w.recs, k)
			bytes += size
			left--
		}
	}
	if req.len() > 0 {
		requests = append(requests, req)
	}
	w.lanes = slices.DeleteFunc(w.lanes, func(q []int) bool { return len(q) == 0 })
	return requests
}

// pick sets w.takes to the records each lane gives the round, and leaves
// the rest in the lanes. Lanes share no key, so with nothing to check
// against other writes or earlier failures (a lane's choice then depends on
// its records alone) a large round picks its lanes in parallel.
func (w *orderedWrite) pick() {
	if w.backing == nil {
		w.backing = make([]int, w.remaining)
	}
	w.takes = w.takes[:0]
	used := 0
	for _, queue := range w.lanes {
		w.takes = append(w.takes, w.backing[used:used:used+len(queue)])
		used += len(queue)
	}
	alone := len(w.failed) == 0 && (w.seq == nil || w.seq.after == nil)
	if runs := workers(w.remaining); alone && runs > 1 {
		if len(w.seenByRun) < runs {
			w.seenByRun = append(w.seenByRun, make([]map[string]bool, runs-len(w.seenByRun))...)
		}
		eachOf(len(w.lanes), w.remaining, func(run, l int) {
			seen := w.seenByRun[run]
			if seen == nil {
				seen = make(map[string]bool, 2*w.recs.keysIn(w.lanes[l]))
				w.seenByRun[run] = seen
			}
			clear(seen)
			w.takes[l] = w.pickLane(l, seen, w.takes[l])
		})
		return
	}
	if w.seen == nil {
		n := 0
		for _, queue := range w.lanes {
			n += w.recs.keysIn(queue)
		}
		w.seen = make(map[string]bool, n)
	}
	clear(w.seen)
	for l := range w.lanes {
		w.takes[l] = w.pickLane(l, w.seen, w.takes[l])
	}
}

// pickLane appends to take the records lane l gives the round: in order,
// those that share no partition key with a record taken or passed over
// before them (in seen), so no key overtakes itself, and have no key an
// earlier write still holds. The rest stay in the lane.
func (w *orderedWrite) pickLane(l int, seen map[string]bool, take []int) []int {
	queue := w.lanes[l]
	rest := queue[:0] // compacted in place: rest never passes the reader
	for _, k := range queue {
		if w.failAfter(k) {
			continue
		}
		switch w.held(k, seen) {
		case heldBack:
			rest = append(rest, k)
			continue
		case failedUnsent:
			continue
		}
		if w.clashes(k, seen) {
			rest = append(rest, k)
			continue
		}
		take = append(take, k)
	}
	w.lanes[l] = rest
	return take
}

// clashes reports whether record k shares a partition key with a record the
// round took or passed over in its lane, and marks its keys: taken if it
// does not clash, passed over if it does.
func (w *orderedWrite) clashes(k int, seen map[string]bool) bool {
	if r := w.recs; r.members == nil || r.members[k] == nil {
		pk := r.src[r.index[k]].PartitionKey
		_, clash := seen[pk]
		seen[pk] = clash
		return clash
	}
	clash := false
	keys(w.recs, k, func(pk string) bool {
		_, clash = seen[pk]
		return !clash
	})
	keys(w.recs, k, func(pk string) bool { seen[pk] = clash; return true })
	return clash
}

// What held found of a record's keys.
const (
	free         = iota // no earlier write holds them
	heldBack            // an earlier write in flight holds one
	failedUnsent        // an earlier write's record of one failed for good
)

// held tells whether record k has a key an earlier write still holds: its
// keys are then marked passed over, so that no later record of them is
// taken this round, and the round notes what to wait for. If the earlier
// write's record of a key failed for good, record k fails unsent, as after
// an earlier failure in this write.
func (w *orderedWrite) held(k int, seen map[string]bool) int {
	if w.seq == nil || w.seq.after == nil {
		return free
	}
	var (
		wait   <-chan struct{}
		failed error
	)
	keys(w.recs, k, func(pk string) bool {
		wait, failed = w.seq.waitingFor(pk)
		if failed != nil {
			w.markKeyFailed(pk, failed)
		}
		return wait == nil && failed == nil
	})
	if failed != nil && w.failAfter(k) {
		return failedUnsent
	}
	if wait == nil {
		return free
	}
	if w.wait == nil {
		w.wait = wait
	}
	w.heldBack += w.recs.count(k)
	keys(w.recs, k, func(pk string) bool { seen[pk] = true; return true })
	return heldBack
}
