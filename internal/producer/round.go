package producer

import (
	"slices"

	"github.com/connect-kinesis/connect-kinesis/internal/kinesisx"
)

// A round of an ordered write: which records each lane gives it, and the
// requests they are packed into (see writeOrdered).

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
		fill     requestFill
		left     int // records of the round not packed yet
	)
	for _, take := range w.takes {
		left += len(take)
	}
	for _, take := range w.takes {
		w.remaining -= len(take)
		for _, k := range take {
			size := w.recs.size(k)
			if fill.full(size) {
				requests = append(requests, req)
				req, fill = records{}, requestFill{}
			}
			if req.entries == nil {
				// Room for this round's records, not the write's: a
				// round of a hot key's write holds each key once.
				req = w.recs.withCap(min(left, kinesisx.MaxPutRecordsCount))
			}
			req.push(w.recs, k)
			fill.add(size)
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
	lanesIndependent := len(w.failed) == 0 && (w.seq == nil || w.seq.after == nil)
	if runs := workers(w.remaining); lanesIndependent && runs > 1 {
		if len(w.keysByWorker) < runs {
			w.keysByWorker = append(w.keysByWorker, make([]roundKeys, runs-len(w.keysByWorker))...)
		}
		eachOf(len(w.lanes), w.remaining, func(run, l int) {
			met := w.keysByWorker[run]
			if met == nil {
				met = make(roundKeys, 2*w.recs.keysIn(w.lanes[l]))
				w.keysByWorker[run] = met
			}
			clear(met)
			w.takes[l] = w.pickLane(l, met, w.takes[l])
		})
		return
	}
	if w.roundKeys == nil {
		n := 0
		for _, queue := range w.lanes {
			n += w.recs.keysIn(queue)
		}
		w.roundKeys = make(roundKeys, n)
	}
	clear(w.roundKeys)
	for l := range w.lanes {
		w.takes[l] = w.pickLane(l, w.roundKeys, w.takes[l])
	}
}

// pickLane appends to take the records lane l gives the round: in order,
// those that share no partition key with a record taken or passed over
// before them (in met), so no key overtakes itself, and have no key an
// earlier write still holds. The rest stay in the lane.
func (w *orderedWrite) pickLane(l int, met roundKeys, take []int) []int {
	queue := w.lanes[l]
	rest := queue[:0] // compacted in place: rest never passes the reader
	for _, k := range queue {
		if w.failAfter(k) {
			continue
		}
		switch w.held(k, met) {
		case heldBack:
			rest = append(rest, k)
			continue
		case failedUnsent:
			continue
		}
		if w.clashes(k, met) {
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
func (w *orderedWrite) clashes(k int, met roundKeys) bool {
	if r := w.recs; r.members == nil || r.members[k] == nil {
		pk := r.src[r.index[k]].PartitionKey
		_, clash := met[pk]
		met[pk] = clash
		return clash
	}
	clash := false
	keys(w.recs, k, func(pk string) bool {
		_, clash = met[pk]
		return !clash
	})
	keys(w.recs, k, func(pk string) bool { met[pk] = clash; return true })
	return clash
}

// roundKeys maps each partition key a round has met to whether the round
// passed it over (true) rather than took it (false); a key absent has not
// been met.
type roundKeys map[string]bool

// earlierWrite is what held found of a record's keys.
type earlierWrite int

const (
	notHeld      earlierWrite = iota // no earlier write holds them
	heldBack                         // an earlier write in flight holds one
	failedUnsent                     // an earlier write's record of one failed for good
)

// held tells whether record k has a key an earlier write still holds: its
// keys are then marked passed over, so that no later record of them is
// taken this round, and the round notes what to wait for. If the earlier
// write's record of a key failed for good, record k fails unsent, as after
// an earlier failure in this write.
func (w *orderedWrite) held(k int, met roundKeys) earlierWrite {
	if w.seq == nil || w.seq.after == nil {
		return notHeld
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
		return notHeld
	}
	if w.wait == nil {
		w.wait = wait
	}
	w.heldRecords += w.recs.count(k)
	keys(w.recs, k, func(pk string) bool { met[pk] = true; return true })
	return heldBack
}
