package chaos

import (
	"sort"
	"strings"
	"time"

	"github.com/connect-kinesis/connect-kinesis/internal/consumer"
)

// The streams class's invariants (soak_streams.go), judged on every check
// beside the others:
//   - a deleted incarnation left no record undelivered (the deletion waited
//     for them; what is left is lost, and the checker counts it too);
//   - nothing of a deleted incarnation is delivered after its deletion (a
//     re-created name starts fresh: its records carry their own label);
//   - every shard with records of a stream created during the run is first
//     delivered from within newStreamBound of the stream being ACTIVE, or
//     of the last fault's end.

// goneLabels are the labels of the deleted incarnations.
func (m *monitor) goneLabels() map[string]bool {
	m.s.smu.Lock()
	defer m.s.smu.Unlock()
	gone := map[string]bool{}
	for _, st := range m.s.dyn {
		if !st.deleted.IsZero() {
			gone[st.label] = true
		}
	}
	return gone
}

// staleRule returns the judge of each delivery against the deletions: a
// delivery of a deleted incarnation stamped more than staleSlack after its
// deletion breaks "nothing of a deleted stream after its deletion". As for
// fencing, only incarnations with a plain file output are judged (a slow
// output's stamp may lag the hand-over by seconds), and none inside a
// pause's window (a batch handed over before SIGSTOP is stamped after
// SIGCONT).
func (m *monitor) staleRule() func(Delivery) {
	deleted := map[string]time.Time{}
	m.s.smu.Lock()
	for _, st := range m.s.dyn {
		if !st.deleted.IsZero() {
			deleted[st.label] = st.deleted
		}
	}
	m.s.smu.Unlock()
	m.s.mu.Lock()
	plain := make(map[string]bool, len(m.s.plain))
	for k, v := range m.s.plain {
		plain[k] = v
	}
	var pauses []Window
	for _, w := range m.s.windows {
		if strings.HasPrefix(w.What, "pause ") {
			pauses = append(pauses, w)
		}
	}
	m.s.mu.Unlock()
	return func(d Delivery) {
		label, _, _ := strings.Cut(d.Shard, "/")
		at, ok := deleted[label]
		if !ok || !d.At.After(at.Add(staleSlack)) || !plain[d.Inst] || m.stale[label] {
			return
		}
		for _, w := range pauses {
			if !d.At.Before(w.From) && !d.At.After(w.To) {
				return
			}
		}
		m.stale[label] = true
		m.v.StaleDeliveries++
		m.fail("deleted stream", "%s delivered %s/%d of %s (seq %s) at %s, %v after its stream was deleted at %s",
			d.Inst, d.K, d.C, d.Shard, d.Seq, m.s.at(d.At), d.At.Sub(at).Round(100*time.Millisecond), m.s.at(at))
	}
}

// ofIncarnation says whether checkpoint p of shard id (label/shard) is one
// of that incarnation's records: a name created again keeps its deleted
// incarnation's checkpoints until the new one's first take clears them.
func (m *monitor) ofIncarnation(id string, p consumer.Position) bool {
	ss := m.sh.shards[id]
	return ss != nil && !p.ShardEnd && ss.seqs[p.Sequence]
}

// unreadOf counts the records the shadow read of label's shards that were
// neither delivered nor dead-lettered.
func (m *monitor) unreadOf(label string) (n int, example string) {
	for _, id := range m.sh.order {
		if !strings.HasPrefix(id, label+"/") {
			continue
		}
		ss := m.sh.shards[id]
		for _, r := range ss.recs {
			if !m.done(r.Shard, r.Seq) {
				if n == 0 {
					example = r.Shard + " " + r.Seq
				}
				n++
			}
		}
	}
	return n, example
}

// streamsClass judges the class's incarnations once the deliveries of this
// check are in.
func (m *monitor) streamsClass(now time.Time, final bool) {
	m.s.smu.Lock()
	dyn := append([]*soakStream(nil), m.s.dyn...)
	type state struct {
		drainFrom, deleted, active time.Time
		during                     bool
	}
	states := make([]state, len(dyn))
	for i, st := range dyn {
		states[i] = state{st.drainFrom, st.deleted, st.active, st.during}
	}
	m.s.smu.Unlock()
	for i, st := range dyn {
		s := states[i]
		switch {
		case s.deleted.IsZero() && !s.drainFrom.IsZero():
			// Draining for a deletion: count what is left, from a read of
			// the whole stream begun after its producer stopped.
			if polled := m.sh.polledAt[st.label]; polled.After(s.drainFrom) {
				n, _ := m.unreadOf(st.label)
				m.s.smu.Lock()
				st.unread, st.judgedAt = n, now
				m.s.smu.Unlock()
			}
		case !s.deleted.IsZero() && !m.deleted[st.label] && (final || now.Add(-holdBack).After(s.deleted)):
			// Every delivery stamped before the deletion is in.
			m.deleted[st.label] = true
			if n, ex := m.unreadOf(st.label); n > 0 {
				m.v.DeletedUnread += n
				m.fail("deleted stream", "%s was deleted with %d records undelivered (first: %s), %v after its producer stopped",
					st.label, n, ex, s.deleted.Sub(s.drainFrom).Round(100*time.Millisecond))
			}
		}
		if s.during && !final {
			m.newStreamShards(st.label, s.active, now)
		}
	}
}

// newStreamShards judges the shards of a stream created during the run:
// each with records is first delivered from within newStreamBound of the
// stream being ACTIVE, or of the last fault's end if later; a shard whose
// first record came later than that has until it plus newStreamSlack.
func (m *monitor) newStreamShards(label string, active, now time.Time) {
	bound := newStreamBound(m.s.plan.LeasePeriod)
	for _, id := range m.sh.order {
		if !strings.HasPrefix(id, label+"/") || m.newStream[id] {
			continue
		}
		ss := m.sh.shards[id]
		if read, ok := m.shardRead[id]; ok {
			m.newStream[id] = true
			m.v.NewStreamReads = append(m.v.NewStreamReads, read.Sub(active))
			continue
		}
		if len(ss.recs) == 0 {
			continue
		}
		quiet, ok := m.s.quietSince(label)
		if !ok {
			continue
		}
		from := active
		if quiet.After(from) {
			from = quiet
		}
		deadline := from.Add(bound)
		if late := ss.seenAt[0].Add(newStreamSlack); late.After(deadline) {
			deadline = late
		}
		// Deliveries younger than holdBack are not in yet.
		if now.Add(-holdBack).After(deadline) {
			m.newStream[id] = true
			m.v.Liveness++
			m.v.NewStreamLate++
			m.fail("liveness", "%s of a stream created during the run: no record delivered %v after it was ACTIVE at %s (bound %v from %s); its first record in the stream since %s",
				id, now.Sub(active).Round(100*time.Millisecond), m.s.at(active), bound, m.s.at(from), m.s.at(ss.seenAt[0]))
		}
	}
}

// newStreamSlack: a shard whose first record reached the stream after the
// bound's start is judged from that record, this long after it.
const newStreamSlack = 5 * time.Second

// newStreamFigures renders the new streams' shards' first reads for the
// report.
func newStreamFigures(reads []time.Duration) (lo, hi time.Duration) {
	if len(reads) == 0 {
		return 0, 0
	}
	s := append([]time.Duration(nil), reads...)
	sort.Slice(s, func(i, j int) bool { return s[i] < s[j] })
	return s[0], s[len(s)-1]
}
