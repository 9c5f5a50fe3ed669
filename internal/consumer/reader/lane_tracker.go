package reader

import (
	"slices"
	"strings"

	"github.com/connect-kinesis/connect-kinesis/internal/consumer"
)

// The tracker with shard_parallelism above 1: every record of a shard is
// an entry of its own, added in sequence order when the record is fetched,
// because the lanes hand records over out of sequence order. A lane batch
// acks its records' entries; the checkpoint still only passes the
// contiguous run of acked entries from the oldest.

// addRecords registers the records of one answer, in sequence order, and
// returns the id of the first; the others follow it one by one.
func (t *tracker) addRecords(recs []consumer.Record) uint64 {
	t.mu.Lock()
	defer t.mu.Unlock()
	first := t.nextID + 1
	t.queue = slices.Grow(t.queue, len(recs))
	for _, rec := range recs {
		t.nextID++
		t.queue = append(t.queue, trackedBatch{id: t.nextID, last: recordPosition(rec), records: 1})
	}
	return first
}

// ackAll marks the entries ids (ascending) processed and folds the acked
// prefix into done.
func (t *tracker) ackAll(ids []uint64) {
	t.mu.Lock()
	defer t.mu.Unlock()
	for _, id := range ids {
		if i, ok := slices.BinarySearchFunc(t.queue, id, func(b trackedBatch, id uint64) int {
			switch {
			case b.id < id:
				return -1
			case b.id > id:
				return 1
			}
			return 0
		}); ok {
			t.queue[i].acked = true
		}
	}
	n := 0
	for n < len(t.queue) && t.queue[n].acked {
		n++
	}
	if n > 0 {
		// The entries point into their GetRecords answer; the position
		// kept as done outlives it, so it gets its own copy.
		t.done, t.hasDone = t.queue[n-1].last, true
		t.done.Sequence = strings.Clone(t.done.Sequence)
		rest := copy(t.queue, t.queue[n:])
		clear(t.queue[rest:])
		t.queue = t.queue[:rest]
		t.doneGen++
	}
	t.signal()
}

// recordPosition is the checkpoint that processing rec allows: its
// sequence number, or "<seq>/<subseq>" for a user record of a KPL
// aggregate that is not the aggregate's last.
func recordPosition(rec consumer.Record) consumer.Position { return rec.Position() }
