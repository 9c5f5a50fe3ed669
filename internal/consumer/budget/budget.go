package budget

import (
	"fmt"
	"slices"
	"sync"
	"time"

	"github.com/connect-kinesis/connect-kinesis/internal/consumer"
)

// The byte budget of an input (max_buffered_bytes).
//
// One budget covers what the input's readers hold, across all its streams
// and shards: room reserved for the call under way (a GetRecords answer
// being fetched and decoded, or a subscription's next event), records
// fetched and not yet handed to the pipeline, and batches in the pipeline
// not yet acked (a nacked batch stays charged until it is acked). What a
// reader still holds itself when it ends (lease lost, hand-off, shutdown)
// is given back then; a batch it handed to the pipeline stays charged
// until the pipeline acks or nacks it, since its records are in memory
// until then (shard.go).
//
// A record source asks for room right before each call that returns
// records, and gives it back when that call fails, so a shard that is not
// reading (its calls fail, it waits out a backoff, it subscribes again)
// holds no room (shard.go). No shard asks for more than half the
// budget, unless one of its records needs more, so one shard never holds
// the whole budget while others wait.
//
// Admission is first come, first served: readers queue, and only the head
// of the queue can be let in, so a shard that waits is never overtaken by
// shards that asked later, whatever the shard count or record size. The
// head is let in when its whole estimate fits, or part of it (at least one
// record's worth: it then asks Kinesis for fewer records); and when
// nothing at all is held, whatever its estimate, so an answer larger than
// the whole budget still goes ahead, alone. Room comes back when the
// pipeline acks and when a call fails, neither of which waits for the
// budget, so the queue moves while the pipeline does. When it does not
// move for stallAfter, a WARN names the shards holding the room
// (watch.go).
type Budget struct {
	capacity int64
	metrics  *consumer.Metrics
	// stallAfter is how long the head of the queue may go without a grant
	// before the stall is logged.
	stallAfter time.Duration

	mu    sync.Mutex
	held  int64
	queue []*budgetWait // oldest first
	// lastGrant is when a reader was last let in.
	lastGrant time.Time
	// holders are the shards that hold room, to name in a stall's WARN.
	holders map[*Shard]struct{}
	// peak is the most ever held, for tests and benches.
	peak int64
	// open counts the shards not closed yet. leaked is what the budget
	// found held once no shard held anything (checkLocked), and took
	// back; reported is the part of it Watch logged.
	open             int
	leaked, reported int64
}

// budgetStallAfter is how long the head of the queue may wait without any
// grant before the stall is logged.
const budgetStallAfter = time.Minute

// budgetWait is one reader's place in the queue.
type budgetWait struct {
	want, least int64
	since       time.Time
	ready       chan struct{} // closed once granted
	granted     int64         // set before ready is closed
}

func New(capacity int64, m *consumer.Metrics) *Budget {
	b := &Budget{capacity: capacity, metrics: m, stallAfter: budgetStallAfter, holders: map[*Shard]struct{}{}}
	m.Budget.Set(capacity)
	return b
}

// enqueue queues a request for want bytes, of which least would do.
func (b *Budget) enqueue(want, least int64) *budgetWait {
	w := &budgetWait{want: want, least: min(least, want), since: time.Now(), ready: make(chan struct{})}
	b.mu.Lock()
	defer b.mu.Unlock()
	b.queue = append(b.queue, w)
	b.grantLocked()
	return w
}

// resize sets what w asks for (est gives want and least), unless it was
// granted already; it keeps its place in the queue.
func (b *Budget) resize(w *budgetWait, est func() (want, least int64)) {
	want, least := est()
	b.mu.Lock()
	defer b.mu.Unlock()
	if !slices.Contains(b.queue, w) {
		return
	}
	w.want, w.least = want, min(least, want)
	b.grantLocked()
}

// cancel takes w out of the queue; if it was granted meanwhile, its grant
// is given back.
func (b *Budget) cancel(w *budgetWait) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if i := slices.Index(b.queue, w); i >= 0 {
		b.queue = slices.Delete(b.queue, i, i+1)
		b.grantLocked()
		return
	}
	select {
	case <-w.ready:
		b.giveBackLocked(w.granted)
	default:
	}
}

// charge counts n more bytes: an answer that came out larger than its
// grant.
func (b *Budget) charge(n int64) {
	if n <= 0 {
		return
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	b.held += n
	b.peak = max(b.peak, b.held)
	b.metrics.Buffered.Set(b.held)
}

// giveBack returns n bytes: records acked, a call that failed, an answer
// smaller than its grant. The queue's head may then be let in.
func (b *Budget) giveBack(n int64) {
	if n <= 0 {
		return
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	b.giveBackLocked(n)
}

func (b *Budget) giveBackLocked(n int64) {
	b.held -= n
	b.grantLocked()
}

// opened counts a new shard.
func (b *Budget) opened() {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.open++
}

// giveBackFrom returns n bytes that shard s held, notes whether s still
// holds room, and, when closing, that s closed; then it checks the
// budget's invariant.
func (b *Budget) giveBackFrom(s *Shard, n int64, holding, closing bool) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if holding {
		b.holders[s] = struct{}{}
	} else {
		delete(b.holders, s)
	}
	if closing {
		b.open--
	}
	b.giveBackLocked(n)
	b.checkLocked()
}

// checkLocked holds the budget to its invariant: once every shard is
// closed and none holds room (every batch handed to the pipeline got its
// verdict), the budget holds nothing. Room held then would be held for the
// life of the process, a little less of max_buffered_bytes each time,
// until a shard's least estimate no longer fits and the input stalls for
// good; so it is taken back, and Watch logs it as the defect it is.
func (b *Budget) checkLocked() {
	if b.open > 0 || len(b.holders) > 0 || len(b.queue) > 0 || b.held == 0 {
		return
	}
	b.leaked += b.held
	b.held = 0
	b.metrics.Buffered.Set(0)
}

// takeLeaked is what checkLocked took back since the last call.
func (b *Budget) takeLeaked() int64 {
	b.mu.Lock()
	defer b.mu.Unlock()
	n := b.leaked - b.reported
	b.reported = b.leaked
	return n
}

// grantLocked lets in the head of the queue while it fits, in order, and
// sets the gauges to what is then held and waiting.
func (b *Budget) grantLocked() {
	defer func() {
		b.metrics.Buffered.Set(b.held)
		b.metrics.Waiting.Set(int64(len(b.queue)))
	}()
	for len(b.queue) > 0 {
		w := b.queue[0]
		free := b.capacity - b.held
		switch {
		case b.held <= 0 || free >= w.want:
			w.granted = w.want
		case free >= w.least:
			w.granted = free
		default:
			return
		}
		b.queue = b.queue[1:]
		b.held += w.granted
		b.peak = max(b.peak, b.held)
		b.lastGrant = time.Now()
		close(w.ready)
	}
}

// hold registers s as holding room (or not), for stall reports.
func (b *Budget) hold(s *Shard, holding bool) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if holding {
		b.holders[s] = struct{}{}
	} else {
		delete(b.holders, s)
	}
}

// State is what the budget holds, how many readers wait and since when
// the oldest does (zero when none).
func (b *Budget) State() (held int64, waiting int, oldest time.Time) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if len(b.queue) > 0 {
		oldest = b.queue[0].since
	}
	return b.held, len(b.queue), oldest
}

// callsUnderWay is the room reserved for calls that have not answered
// yet: GetRecords calls, or subscriptions waiting for their next event.
func (b *Budget) callsUnderWay() int64 {
	b.mu.Lock()
	defer b.mu.Unlock()
	var n int64
	for s := range b.holders {
		n += s.calling.Load()
	}
	return n
}

// handedToPipeline is what the budget holds for batches handed to the
// pipeline and not yet acked or nacked.
func (b *Budget) handedToPipeline() int64 {
	b.mu.Lock()
	holders := make([]*Shard, 0, len(b.holders))
	for s := range b.holders {
		holders = append(holders, s)
	}
	b.mu.Unlock()
	// A shard's mu is taken without the budget's: Release holds the
	// shard's and then gives back to the budget.
	var n int64
	for _, s := range holders {
		s.mu.Lock()
		n += s.inPipeline
		s.mu.Unlock()
	}
	return n
}

// stalledSince is since when the head of the queue has had no grant (zero
// when nobody waits), and the shards holding room then.
func (b *Budget) stalledSince() (time.Time, []*Shard) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if len(b.queue) == 0 {
		return time.Time{}, nil
	}
	since := b.queue[0].since
	if b.lastGrant.After(since) {
		since = b.lastGrant
	}
	holders := make([]*Shard, 0, len(b.holders))
	for s := range b.holders {
		holders = append(holders, s)
	}
	return since, holders
}

// Drained checks the budget's invariant once no reader holds anything:
// every shard closed, and every batch it handed to the pipeline acked or
// nacked. The budget then holds nothing, no shard holds room and none
// waits; anything else is room that nobody will give back, which shrinks
// max_buffered_bytes for the life of the process. The error says what is
// left and which shards hold it.
func (b *Budget) Drained() error {
	b.mu.Lock()
	held, waiting := b.held, len(b.queue)
	holders := make([]*Shard, 0, len(b.holders))
	for s := range b.holders {
		holders = append(holders, s)
	}
	b.mu.Unlock()
	if leaked := b.Leaked(); leaked != 0 {
		return fmt.Errorf("the byte budget held %d bytes once no reader held anything, and took them back", leaked)
	}
	if held == 0 && waiting == 0 && len(holders) == 0 {
		return nil
	}
	return fmt.Errorf("the byte budget is not drained: it holds %d bytes, %d shards wait, held by %s", held, waiting, describeHolders(holders))
}

// Leaked is what the budget's check took back in all: room held once no
// reader held anything. Anything but zero is a defect.
func (b *Budget) Leaked() int64 {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.leaked
}

// PeakHeld is the most the budget ever held.
func (b *Budget) PeakHeld() int64 {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.peak
}

// SetStallAfter sets how long the head of the queue may go without a grant
// before the stall is logged (budgetStallAfter unless set).
func (b *Budget) SetStallAfter(d time.Duration) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.stallAfter = d
}
