package checkpointer

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"sync"
	"time"

	"github.com/connect-kinesis/connect-kinesis/internal/consumer"
)

// DefaultMarkInterval paces a MarkWriter: 10 calls a second on average per
// stream an instance reads (at most markBurst more at once), and at most
// this long (plus the call) before fetched records may be handed over.
const DefaultMarkInterval = 100 * time.Millisecond

// MarkWriter gathers the delivered positions an instance's readers ask to
// store for the shards of one stream, and writes them in one WriteDelivered
// call for all of them, one call an interval on average (Run). A reader asks when it has fetched
// records (Ask) and hands them to the pipeline only once the answer came
// (Cover waits for it): a write covering them succeeded, so any later owner
// of the shard marks them if it reads them again. An interval in which no
// reader asked for more than was written costs no call.
//
// Contract: Ask may be called from any goroutine, for any lease the
// instance holds; Run must be running for answers to come. An answer is
// nil (written, or already covered), an error wrapping
// consumer.ErrLeaseLost (the lease is fenced: deliver nothing more of the
// shard under it), or never, while the store cannot be written (Redis
// down, or forgot the group until a re-seed): the reader waits, as it must
// not deliver what no write covers, and gives up with its own ctx.
type MarkWriter struct {
	store    *Store
	owner    string
	interval time.Duration

	mu sync.Mutex
	// written is the highest position written per shard, under its token.
	written map[string]writtenMark
	// found is the highest mark a write found stored per shard above what
	// this writer had written, under the token it wrote with (Found).
	found map[string]writtenMark
	// tried are, per shard, the positions of the writes under one token
	// that failed since its last write that succeeded: a write can run and
	// still fail (its reply timed out, its replicas did not acknowledge it
	// in time), so the store may hold any of them as this writer's own.
	tried map[string]triedMarks
	// pending are the asks not yet written, per shard.
	pending map[string]*pendingMark
	// wake tells Run that something was asked.
	wake    chan struct{}
	failing bool
}

type writtenMark struct {
	token int64
	pos   consumer.Position
}

type triedMarks struct {
	token int64
	pos   []consumer.Position
}

type pendingMark struct {
	token   int64
	pos     consumer.Position
	waiters []chan error
}

// NewMarkWriter returns the writer of owner's marks on this stream; 0 for
// interval is DefaultMarkInterval.
func (s *Store) NewMarkWriter(owner string, interval time.Duration) *MarkWriter {
	if interval <= 0 {
		interval = DefaultMarkInterval
	}
	return &MarkWriter{store: s, owner: owner, interval: interval,
		written: map[string]writtenMark{}, found: map[string]writtenMark{}, tried: map[string]triedMarks{}, pending: map[string]*pendingMark{}, wake: make(chan struct{}, 1)}
}

// Ask asks for p to be stored as delivered for l's shard and returns the
// channel its answer comes on (buffered; read it or not). A position a
// write under the same token covered already is answered at once.
func (w *MarkWriter) Ask(l consumer.Lease, p consumer.Position) <-chan error {
	ch := make(chan error, 1)
	w.mu.Lock()
	defer w.mu.Unlock()
	if done, ok := w.written[l.Shard]; ok && done.token == l.Token && p.Compare(done.pos) <= 0 {
		ch <- nil
		return ch
	}
	pm, ok := w.pending[l.Shard]
	if !ok || pm.token != l.Token {
		if ok {
			// A newer take of the shard: the old lease's waiters are
			// answered by the write's fencing of their token, which this
			// replaces; they are told now.
			for _, c := range pm.waiters {
				c <- fmt.Errorf("storing how far shard %s was delivered: lease token %d replaced by %d: %w", l.Shard, pm.token, l.Token, consumer.ErrLeaseLost)
			}
		}
		pm = &pendingMark{token: l.Token, pos: p}
		w.pending[l.Shard] = pm
	} else if pm.pos.Compare(p) < 0 {
		pm.pos = p
	}
	pm.waiters = append(pm.waiters, ch)
	select {
	case w.wake <- struct{}{}:
	default:
	}
	return ch
}

// Cover asks for p and waits for the answer or ctx.
func (w *MarkWriter) Cover(ctx context.Context, l consumer.Lease, p consumer.Position) error {
	select {
	case err := <-w.Ask(l, p):
		return err
	case <-ctx.Done():
		return ctx.Err()
	}
}

// Found returns the highest mark a write under l's token found stored for
// its shard before it wrote, above this writer's own earlier writes under
// that token, zero when none (consumer.Marker). A reader
// raises its own to it once its ask is answered: above the take's mark, it
// is how far an owner the store handed the shard to meanwhile may have
// delivered it (a re-seed that won the shard back and whose reply was
// lost).
func (w *MarkWriter) Found(l consumer.Lease) consumer.Position {
	w.mu.Lock()
	defer w.mu.Unlock()
	if f, ok := w.found[l.Shard]; ok && f.token == l.Token {
		return f.pos
	}
	return consumer.Position{}
}

// Forget drops what is known of a shard the instance no longer reads.
func (w *MarkWriter) Forget(shard string) {
	w.mu.Lock()
	defer w.mu.Unlock()
	delete(w.written, shard)
	delete(w.found, shard)
	delete(w.tried, shard)
}

// WriteBack writes every mark this store wrote or read at a take back, each
// only forwards (consumer.Marker).
func (w *MarkWriter) WriteBack(ctx context.Context) error {
	_, _, err := w.store.writeBackMarks(ctx)
	return err
}

// markBurst is how many calls a MarkWriter may make at once after a
// quiet spell, above its one call per interval.
const markBurst = 3

// Run writes until ctx ends, paced by a token bucket: one call per interval
// on average and up to markBurst at once after a quiet spell, one at a
// time. An ask goes at once while the bucket holds a call, so a stream
// whose readers ask less often than once an interval (a few busy shards,
// each fetching once a poll_interval or slower) waits only for the call,
// not for the rest of an interval; asks made while a call is under way go
// together in the next. Under more asks than one an interval the bucket
// empties and the calls go an interval apart, each for every shard that
// asked meanwhile: an ask then waits at most an interval plus the call,
// half an interval on average.
func (w *MarkWriter) Run(ctx context.Context) {
	tokens, filled := float64(markBurst), time.Now()
	t := time.NewTimer(0)
	<-t.C
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-w.wake:
		}
		if !w.asked() {
			continue // the asks that woke it went with the last call
		}
		now := time.Now()
		tokens = min(markBurst, tokens+float64(now.Sub(filled))/float64(w.interval))
		filled = now
		if tokens < 1 {
			t.Reset(time.Duration((1 - tokens) * float64(w.interval)))
			select {
			case <-ctx.Done():
				return
			case <-t.C:
			}
			tokens, filled = 1, time.Now()
		}
		tokens--
		if w.flush(ctx) {
			// Asks were put back after a failed write: try again after
			// the interval without waiting for a new ask, and make the
			// retries one an interval.
			tokens, filled = min(tokens, 0), time.Now()
			select {
			case w.wake <- struct{}{}:
			default:
			}
		}
	}
}

// asked reports whether an ask waits for a write.
func (w *MarkWriter) asked() bool {
	w.mu.Lock()
	defer w.mu.Unlock()
	return len(w.pending) > 0
}

// flush writes what was asked since the last write, in one call, and
// answers the waiters. On an error other than fencing the asks stay for
// the next interval, and retry is true.
func (w *MarkWriter) flush(ctx context.Context) (retry bool) {
	w.mu.Lock()
	if len(w.pending) == 0 {
		w.mu.Unlock()
		return false
	}
	batch := w.pending
	w.pending = map[string]*pendingMark{}
	w.mu.Unlock()

	marks := make([]DeliveredMark, 0, len(batch))
	for _, shard := range slices.Sorted(maps.Keys(batch)) {
		pm := batch[shard]
		marks = append(marks, DeliveredMark{Shard: shard, Token: pm.token, Position: pm.pos})
	}
	wctx, cancel := context.WithTimeout(ctx, w.interval*10)
	res, err := w.store.WriteDeliveredFound(wctx, w.owner, marks)
	cancel()

	w.mu.Lock()
	defer w.mu.Unlock()
	if err != nil {
		if !w.failing {
			w.store.log.Warnf("Storing how far %d shards were delivered failed; their readers wait and it is tried again every %v: %v", len(marks), w.interval, err)
		}
		w.failing = true
		// Put the asks back, merged with any made meanwhile.
		for shard, pm := range batch {
			w.noteTried(shard, pm)
			cur, ok := w.pending[shard]
			switch {
			case !ok:
				w.pending[shard] = pm
			case cur.token == pm.token:
				if cur.pos.Compare(pm.pos) < 0 {
					cur.pos = pm.pos
				}
				cur.waiters = append(pm.waiters, cur.waiters...)
			default:
				answer(pm.waiters, fmt.Errorf("storing how far shard %s was delivered: lease token %d replaced by %d: %w", shard, pm.token, cur.token, consumer.ErrLeaseLost))
			}
		}
		return true
	}
	if w.failing && !errors.Is(ctx.Err(), context.Canceled) {
		w.store.log.Infof("Storing how far shards were delivered works again")
	}
	w.failing = false
	lost := map[string]bool{}
	for _, f := range res.Fenced {
		lost[f] = true
	}
	for shard, pm := range batch {
		if lost[shard] {
			delete(w.tried, shard)
			answer(pm.waiters, fmt.Errorf("storing how far shard %s was delivered (token %d): %w", shard, pm.token, consumer.ErrLeaseLost))
			continue
		}
		// A mark found at or below this writer's own last write under the
		// token is that write, and one a failed write under it tried may be
		// that write too: the reader may still hold records up to it that
		// it never handed over (lanes take them later, and a failed write's
		// records wait for this one), which must not be marked. Otherwise
		// another owner stored it.
		if f, ok := res.Found[shard]; ok && !w.own(shard, pm.token, f) {
			if cur, known := w.found[shard]; !known || cur.token != pm.token || cur.pos.Compare(f) < 0 {
				w.found[shard] = writtenMark{token: pm.token, pos: f}
			}
		}
		// Every position tried before is at or below this write's: asks
		// put back are merged at their highest.
		delete(w.tried, shard)
		if done, ok := w.written[shard]; !ok || done.token != pm.token || done.pos.Compare(pm.pos) < 0 {
			w.written[shard] = writtenMark{token: pm.token, pos: pm.pos}
		}
		answer(pm.waiters, nil)
	}
	return false
}

// noteTried keeps the position of a failed write of pm for shard, which
// the store may hold all the same. Called with mu held.
func (w *MarkWriter) noteTried(shard string, pm *pendingMark) {
	t := w.tried[shard]
	if t.token != pm.token {
		t = triedMarks{token: pm.token}
	}
	if n := len(t.pos); n == 0 || t.pos[n-1].Compare(pm.pos) != 0 {
		t.pos = append(t.pos, pm.pos)
	}
	w.tried[shard] = t
}

// own reports whether f, found stored for shard by a write under token,
// may be this writer's: at or below its last write under the token, or
// the position of a failed write under it. Called with mu held.
func (w *MarkWriter) own(shard string, token int64, f consumer.Position) bool {
	if done, ok := w.written[shard]; ok && done.token == token && f.Compare(done.pos) <= 0 {
		return true
	}
	t := w.tried[shard]
	return t.token == token && slices.ContainsFunc(t.pos, func(p consumer.Position) bool { return p.Compare(f) == 0 })
}

func answer(waiters []chan error, err error) {
	for _, c := range waiters {
		c <- err
	}
}

// Marks starts owner's MarkWriter for this stream at the default interval;
// it writes until ctx ends (consumer.MarkingStore).
func (s *Store) Marks(ctx context.Context, owner string) consumer.Marker {
	w := s.NewMarkWriter(owner, 0)
	go w.Run(ctx)
	return w
}
