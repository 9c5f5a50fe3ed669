package producer

import (
	"context"
	"errors"
	"fmt"
	"sync"

	"github.com/connect-kinesis/connect-kinesis/internal/kinesisx"
)

// ErrEarlierRecordFailed is wrapped by the error of a record an ordered
// producer did not send because an earlier record of its partition key in
// the same write failed for good: sending it would have put it before that
// one.
var ErrEarlierRecordFailed = errors.New("not sent: an earlier message with the same partition key failed")

// writeOrdered sends recs keeping each partition key's order. Records are
// grouped by the shard they are predicted to land on (a lane); the lanes
// proceed in parallel, up to MaxInFlight requests at a time, and each lane
// sends one request at a time:
//
//   - a request holds each partition key at most once (in one record, plain
//     or aggregate), so a partial failure can never let a later record of a
//     key land before an earlier one that was refused;
//   - a request's refused records are retried before the lane sends
//     anything else;
//   - a record that fails for good fails the lane's later records of the
//     same keys unsent (ErrEarlierRecordFailed), so a replay of the failed
//     messages comes first.
//
// When an aggregate lands on a shard that does not hold all its members, the
// lane's shard was split or merged: the aggregate's members and everything
// the lane had not sent yet are returned, to be grouped anew by the fresh
// map and sent after what has landed.
func (p *Producer) writeOrdered(ctx context.Context, recs *records, fail func(int, error)) []int {
	lanes := map[int][]int{}
	var order []int
	for k := range recs.len() {
		l := -1
		if recs.lane != nil {
			l = recs.lane[k]
		}
		if _, ok := lanes[l]; !ok {
			order = append(order, l)
		}
		lanes[l] = append(lanes[l], k)
	}

	if len(order) == 1 {
		return p.runLane(ctx, recs, lanes[order[0]], fail)
	}
	var (
		wg     sync.WaitGroup
		mu     sync.Mutex
		resend []int
	)
	for _, l := range order {
		wg.Add(1)
		go func(queue []int) {
			defer wg.Done()
			if again := p.runLane(ctx, recs, queue, fail); len(again) > 0 {
				mu.Lock()
				resend = append(resend, again...)
				mu.Unlock()
			}
		}(lanes[l])
	}
	wg.Wait()
	return resend
}

// lane is the state of one shard's records in an ordered write.
type lane struct {
	recs *records
	// failed maps the partition keys whose records failed for good to why.
	failed map[string]error
	fail   func(int, error)
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

func (l *lane) keys(k int, fn func(string) bool) { keys(l.recs, k, fn) }

// failAfter fails record k unsent if an earlier record of one of its keys
// failed for good, and reports whether it did. Its keys then count as failed
// too, so the records after it wait for a replay as well.
func (l *lane) failAfter(k int) bool {
	if len(l.failed) == 0 {
		return false
	}
	var cause error
	var key string
	l.keys(k, func(pk string) bool {
		if err, ok := l.failed[pk]; ok {
			cause, key = err, pk
			return false
		}
		return true
	})
	if cause == nil {
		return false
	}
	err := fmt.Errorf("%w (partition key %q): %w", ErrEarlierRecordFailed, truncate(key, 64), cause)
	l.markFailed(l.recs, k, err)
	l.recs.each(k, func(i int) { l.fail(i, err) })
	return true
}

// markFailed notes the keys of record k of r as failed for good with err.
func (l *lane) markFailed(r *records, k int, err error) {
	if l.failed == nil {
		l.failed = map[string]error{}
	}
	keys(r, k, func(pk string) bool {
		if _, ok := l.failed[pk]; !ok {
			l.failed[pk] = err
		}
		return true
	})
}

// next splits queue into the next request and the rest. The request takes
// records in queue order while they fit the PutRecords limits and none
// shares a partition key with a record already taken or passed over, so no
// key overtakes itself.
func (l *lane) next(queue []int) (req, rest []int) {
	var (
		taken   = map[string]struct{}{}
		blocked map[string]struct{}
		bytes   int
	)
	for n, k := range queue {
		if l.failAfter(k) {
			continue
		}
		size := l.recs.size(k)
		if len(req) == kinesisx.MaxPutRecordsCount || (len(req) > 0 && bytes+size > kinesisx.MaxPutRecordsBytes) {
			return req, append(rest, queue[n:]...)
		}
		clash := false
		l.keys(k, func(pk string) bool {
			_, inReq := taken[pk]
			_, inBlocked := blocked[pk]
			clash = inReq || inBlocked
			return !clash
		})
		if clash {
			if blocked == nil {
				blocked = map[string]struct{}{}
			}
			l.keys(k, func(pk string) bool { blocked[pk] = struct{}{}; return true })
			rest = append(rest, k)
			continue
		}
		l.keys(k, func(pk string) bool { taken[pk] = struct{}{}; return true })
		req = append(req, k)
		bytes += size
	}
	return req, rest
}

// runLane sends one lane's records, a request at a time, and returns the
// entries to send again after a reshard (see writeOrdered).
func (p *Producer) runLane(ctx context.Context, recs *records, queue []int, fail func(int, error)) []int {
	l := &lane{recs: recs, fail: fail}
	for len(queue) > 0 {
		var req []int
		req, queue = l.next(queue)
		if len(req) == 0 {
			continue
		}
		select {
		case p.slots <- struct{}{}:
		case <-ctx.Done():
			for _, k := range append(req, queue...) {
				recs.each(k, func(i int) { fail(i, ctx.Err()) })
			}
			return nil
		}
		res := p.send(ctx, recs.pick(req), fail)
		<-p.slots
		for k := range res.failed.len() {
			l.markFailed(&res.failed, k, res.err)
		}
		if resend := res.resend; len(resend) > 0 {
			for _, k := range queue {
				if !l.failAfter(k) {
					recs.each(k, func(i int) { resend = append(resend, i) })
				}
			}
			return resend
		}
	}
	return nil
}
