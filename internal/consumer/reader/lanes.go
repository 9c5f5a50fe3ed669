package reader

import (
	"context"
	"sync"
	"time"

	"github.com/connect-kinesis/connect-kinesis/internal/consumer"
)

// Reading a shard in lanes (shard_parallelism above 1).
//
// The reader fetches as on its own path, but hands a shard's records to
// the pipeline through N lanes: a record goes to the lane its partition key
// hashes to (for a de-aggregated KPL record, the user record's own key), so
// all records of one key go through one lane, in sequence order. Each lane
// keeps one batch in flight: its next batch is handed over only once the
// previous one is acked; a nacked batch is sent again (with backoff, for as
// long as it takes) before anything later of its lane, while the other
// lanes go on. Every record is a tracker entry of its own (lane_tracker.go),
// so the checkpoint only moves to the highest record acked together with
// every record before it, whatever order the lanes finish in.
//
// The fetcher reads the next answer while the records queued in the lanes
// (fetched, not yet handed over) are fewer than `limit`, so a shard holds
// at most about `limit` queued records plus one batch per lane.

// laneEntry is a fetched record waiting in its lane.
type laneEntry struct {
	rec    consumer.Record
	id     uint64 // its tracker entry
	behind int64  // MillisBehindLatest of the answer it came in
}

// laneSet is the lanes of one shard reader.
type laneSet struct {
	r    *Reader
	wake []chan struct{} // one per lane, signalled when records are queued

	mu     sync.Mutex
	queues [][]laneEntry
	queued int

	wg   sync.WaitGroup
	idle chan struct{} // closed once every lane has returned
}

func newLaneSet(r *Reader, n int) *laneSet {
	ls := &laneSet{r: r, wake: make([]chan struct{}, n), queues: make([][]laneEntry, n), idle: make(chan struct{})}
	for i := range ls.wake {
		ls.wake[i] = make(chan struct{}, 1)
	}
	return ls
}

// start runs one goroutine per lane. They stop taking records once the
// reader stops fetching, but a lane whose batch is in the pipeline waits
// for its verdict (until the reader ends), so a hand-off can wait for it.
func (ls *laneSet) start() {
	for i := range ls.queues {
		ls.wg.Add(1)
		go ls.run(i)
	}
	go func() {
		ls.wg.Wait()
		close(ls.idle)
	}()
}

// laneOf is the lane of a partition key: FNV-1a, which spreads the keys of
// one shard evenly although they share a range of MD5 hashes.
func laneOf(key string, n int) int {
	h := uint32(2166136261)
	for i := 0; i < len(key); i++ {
		h ^= uint32(key[i])
		h *= 16777619
	}
	return int(h % uint32(n))
}

// push registers the records of one answer with the tracker, in sequence
// order, and queues each in its key's lane.
func (ls *laneSet) push(recs []consumer.Record, behind int64) {
	if len(recs) == 0 {
		return
	}
	id := ls.r.tracker.addRecords(recs)
	n := len(ls.queues)
	ls.mu.Lock()
	for _, rec := range recs {
		l := laneOf(rec.PartitionKey, n)
		ls.queues[l] = append(ls.queues[l], laneEntry{rec: rec, id: id, behind: behind})
		id++
	}
	ls.queued += len(recs)
	ls.mu.Unlock()
	for _, w := range ls.wake {
		select {
		case w <- struct{}{}:
		default:
		}
	}
}

// queuedRecords is how many fetched records wait in the lanes.
func (ls *laneSet) queuedRecords() int {
	ls.mu.Lock()
	defer ls.mu.Unlock()
	return ls.queued
}

// take removes up to limit records from the head of lane i, waiting for
// some; false once the reader stops fetching, also while records wait:
// those are the next owner's, from the checkpoint this reader commits, and
// one handed over now could be in the pipeline during the final commit or
// after the release.
func (ls *laneSet) take(i, limit int) ([]consumer.Record, []uint64, int64, bool) {
	for {
		if ls.r.fetchCtx.Err() != nil {
			return nil, nil, 0, false
		}
		ls.mu.Lock()
		if q := ls.queues[i]; len(q) > 0 {
			n := min(len(q), limit)
			recs, ids := make([]consumer.Record, n), make([]uint64, n)
			for j, e := range q[:n] {
				recs[j], ids[j] = e.rec, e.id
			}
			behind := q[n-1].behind
			clear(q[:n]) // the lane no longer holds these records
			if ls.queues[i] = q[n:]; len(ls.queues[i]) == 0 {
				ls.queues[i] = nil
			}
			ls.queued -= n
			ls.mu.Unlock()
			ls.r.tracker.signal() // room for the fetcher
			return recs, ids, behind, true
		}
		ls.mu.Unlock()
		select {
		case <-ls.wake[i]:
		case <-ls.r.fetchCtx.Done():
			return nil, nil, 0, false
		}
	}
}

// run is lane i: one batch in flight at a time, each followed until every
// record of it is done (isolate.go).
func (ls *laneSet) run(i int) {
	defer ls.wg.Done()
	r := ls.r
	for {
		recs, ids, behind, ok := ls.take(i, r.st.Config.Limit)
		if !ok {
			return
		}
		b := r.newDelivery(recs, behind)
		b.ids = ids
		// Once a batch is in the pipeline its verdict is awaited even
		// after fetching stops, so that a hand-off waits for it; only the
		// reader's end stops that wait.
		if !r.follow(r.fetchCtx, r.ctx, b) {
			return
		}
	}
}

// waitIdle waits until no lane has a batch in the pipeline (every lane has
// returned, the reader having stopped fetching), the timeout passes or the
// reader ends.
func (ls *laneSet) waitIdle(timeout time.Duration) UnackedCause {
	t := time.NewTimer(timeout)
	defer t.Stop()
	select {
	case <-ls.idle:
	case <-t.C:
		ls.r.log.Warnf("Stopped waiting for the lanes' in-flight batches after %v; they may be delivered again", timeout)
	case <-ls.r.ctx.Done():
		return UnackedEnded
	}
	return UnackedTimeout
}

// serve has nothing to do: the lanes hand their records over themselves.
func (ls *laneSet) serve(context.Context) (busy, ok bool) { return false, true }

// ready says the fetcher may read another answer: fewer than `limit`
// records wait in the lanes.
func (ls *laneSet) ready() bool { return ls.queuedRecords() < ls.r.st.Config.Limit }

// empty says no fetched record waits in the lanes.
func (ls *laneSet) empty() bool { return ls.queuedRecords() == 0 }

// put queues the records of one answer in their lanes.
func (ls *laneSet) put(recs []consumer.Record, behind int64) { ls.push(recs, behind) }
