package chaos

import (
	"context"
	"fmt"
	"maps"
	"sort"
	"strings"
	"time"

	"github.com/connect-kinesis/connect-kinesis/internal/consumer"
)

// monitor checks the invariants on every tick while the soak runs.
type monitor struct {
	s     *soak
	sh    shadow
	tail  tailer
	logs  logTail
	fence fence

	pending []Delivery
	first   map[[2]string]Delivery
	dead    map[[2]string]bool // records an input wrote to its dead letter
	firstKC map[string]map[int]bool
	last    map[string]int
	lastBy  map[string]string // the instance that delivered last[k] first
	all     []Delivery
	// handovers are the poison records' rejections by the outputs
	// (handoverPath), apart from the deliveries.
	handovers []Delivery

	// failed are the invariants reported so far: the first problem of
	// each goes to the report even past maxProblems (seed 5, 1 h: ten
	// unmarked duplicates filled the list, and its one order violation
	// and one liveness breach were counted but not named).
	failed map[string]bool

	cps map[string]consumer.Position // stream/shard -> last checkpoint seen
	// created is, per stream label, the creation time the group's
	// checkpoints belonged to at the last poll (soak_checkpoints.go).
	created  map[string]time.Time
	breached map[string]bool // shards in a liveness breach
	// heldAtPoison are the shards excused as held at an uncharged poison
	// record since they last moved.
	heldAtPoison map[string]bool
	rssOver      map[string]bool
	// unmarked says an unmarked duplicate was reported: the first one goes
	// to the report with the events around it, the checker counts all.
	unmarked bool
	// reorderedOnce holds the records whose one unmarked delivery was
	// excused as stamped after a marked one by a paused instance.
	reorderedOnce map[[2]string]bool
	// fronts are where each shard is being read (soak_front.go).
	fronts map[string]*readFront
	// behind are marked duplicates outside every fault's window, judged at
	// the end against the dead letters (poisonHolds).
	behind [][2]Delivery
	// explained are the windows of the duplicated first deliveries that
	// waited behind a poison record (poisonWindows), for the end's table.
	explained []Window
	// waits are the warned budget waits not yet ended, per incarnation
	// (soak_budget.go).
	waits map[string]*budgetWait
	// shardRead is when each shard was first delivered from; newStream
	// the shards of new streams judged against their bound, deleted the
	// deleted incarnations judged for records left behind, stale the
	// incarnations reported for a delivery after their deletion
	// (soak_streams_check.go).
	shardRead map[string]time.Time
	newStream map[string]bool
	deleted   map[string]bool
	stale     map[string]bool

	v Verdict
}

func newMonitor(s *soak) *monitor {
	return &monitor{
		s: s, sh: shadow{kc: s.kc, shards: map[string]*shadowShard{}},
		tail:  tailer{offsets: map[string]int64{}, partial: map[string][]byte{}},
		logs:  logTail{offsets: map[string]int64{}, partial: map[string][]byte{}},
		fence: fence{samples: map[string][]leaseSample{}},
		first: map[[2]string]Delivery{}, dead: map[[2]string]bool{}, firstKC: map[string]map[int]bool{}, last: map[string]int{}, lastBy: map[string]string{},
		shardRead: map[string]time.Time{}, newStream: map[string]bool{}, deleted: map[string]bool{}, stale: map[string]bool{},
		cps: map[string]consumer.Position{}, created: map[string]time.Time{}, breached: map[string]bool{}, heldAtPoison: map[string]bool{}, rssOver: map[string]bool{}, waits: map[string]*budgetWait{},
		v: Verdict{DupsBy: map[string]int{}},
	}
}

// fail records a broken invariant; the first one is kept for the report.
func (m *monitor) fail(invariant, format string, args ...any) {
	msg := fmt.Sprintf(format, args...)
	if m.v.First == "" {
		m.v.First, m.v.FirstAt = invariant+": "+msg, time.Now()
		m.s.note("FIRST BROKEN INVARIANT %s: %s", invariant, msg)
	}
	if len(m.v.Problems) < maxProblems || !m.failed[invariant] {
		m.v.Problems = append(m.v.Problems, invariant+": "+msg)
	}
	if m.failed == nil {
		m.failed = map[string]bool{}
	}
	m.failed[invariant] = true
}

// streamRefs are the streams the shadow reads: every incarnation so far.
func (m *monitor) streamRefs() []shadowRef {
	var refs []shadowRef
	for _, st := range m.s.allStreams() {
		m.s.smu.Lock()
		gone := !st.deleted.IsZero()
		m.s.smu.Unlock()
		refs = append(refs, shadowRef{name: st.name, label: st.label, gone: gone})
	}
	return refs
}

// check runs every invariant once; final processes every delivery.
func (m *monitor) check(ctx context.Context, final bool) error {
	now := time.Now()
	err := pollShadow(ctx, final, m.sh.records, func() error {
		err := m.sh.poll(ctx, m.streamRefs())
		m.s.smu.Lock()
		m.s.shadowFailed = maps.Clone(m.sh.failed)
		m.s.smu.Unlock()
		return err
	})
	if err != nil {
		return err
	}
	ds, err := m.tail.read(withHandovers(m.s.outputFiles()))
	if err != nil {
		return err
	}
	m.pending = append(m.pending, ds...)
	m.sampleLeases(ctx)
	m.deliveries(now, final)
	m.streamsClass(now, final)
	m.fenced()
	m.checkpoints(ctx)
	m.rss()
	if err := m.budgetWaits(); err != nil {
		return err
	}
	if !final {
		m.liveness(now)
	}
	return nil
}

// shadowStallPolls is how many polls in a row that read nothing new end
// the final check's polling.
const shadowStallPolls = 3

// pollShadow polls the shadow once while the soak runs: a read that
// failed is retried on the next tick, and the error is not the soak's.
// At the end (final), it polls until a poll succeeds, and gives up with
// the poll's error only after shadowStallPolls polls in a row read
// nothing new (records is how many records the shadow holds): a backlog
// (soak-big's 96 KiB records on a busy emulator) may take more polls to
// read than a fixed count allowed (seed 3's 1 h run of 2026-12-03 ended
// "could not be carried out" on it, in its drain).
func pollShadow(ctx context.Context, final bool, records func() int, poll func() error) error {
	for stalled := 0; ; {
		had := records()
		err := poll()
		if err == nil || !final {
			return nil
		}
		if records() > had {
			stalled = 0
		} else {
			stalled++
		}
		if stalled == shadowStallPolls || ctx.Err() != nil {
			return err
		}
	}
}

// deliveries checks first deliveries' per-key order and that every
// duplicate falls in a fault's window, in time order, holding back the
// youngest so that lines of all instances are in.
func (m *monitor) deliveries(now time.Time, final bool) {
	sort.SliceStable(m.pending, func(i, j int) bool { return m.pending[i].At.Before(m.pending[j].At) })
	n := len(m.pending)
	if !final {
		n = sort.Search(len(m.pending), func(i int) bool { return !m.pending[i].At.Before(now.Add(-holdBack)) })
	}
	m.s.mu.Lock()
	windows := append([]Window(nil), m.s.windows...)
	nackers, plain := maps.Clone(m.s.nackers), maps.Clone(m.s.plain)
	m.s.mu.Unlock()
	stale := m.staleRule()
	for _, d := range m.pending[:n] {
		if d.Handover {
			// A poison record's rejection, not a delivery: only
			// heldBehindPoison reads these.
			m.handovers = append(m.handovers, d)
			continue
		}
		m.all = append(m.all, d)
		stale(d)
		m.advance(d)
		if d.DeadLetterReason != "" {
			// Given up, not delivered: done for liveness; the checker
			// judges it at the end (splitDeadLetters).
			m.dead[[2]string{d.Shard, d.Seq}] = true
			continue
		}
		if plain[d.Inst] {
			m.fence.queue = append(m.fence.queue, d)
		}
		id := [2]string{d.Shard, d.Seq}
		if f, seen := m.first[id]; seen {
			if d.Redelivered != "true" && !m.unmarked && !unmarkedAllowed(windows, f, d) && !m.reordered(id, windows, f, d) {
				m.unmarked = true
				m.fail("redelivery mark", "%s/%d of %s (seq %s) first delivered by %s at %s, again by %s at %s without kinesis_redelivered: true (%q, attempt %q)",
					d.K, d.C, d.Shard, d.Seq, f.Inst, m.s.at(f.At), d.Inst, m.s.at(d.At), d.Redelivered, d.Attempt)
			}
			what := windowOf(windows, f)
			if what == "" && d.Redelivered == "true" {
				// Judged at the end: a pause's window is known only once
				// it ends, and a poison record's dead letter may come
				// later still (poisonHolds).
				m.behind = append(m.behind, [2]Delivery{f, d})
				continue
			}
			if what == "" {
				m.v.DupsOutside++
				m.v.noteOutside(f, d)
				m.fail("duplicates", "%s/%d of %s (seq %s) first delivered by %s at %s, again by %s at %s, outside every fault's window",
					d.K, d.C, d.Shard, d.Seq, f.Inst, m.s.at(f.At), d.Inst, m.s.at(d.At))
				what = "no fault"
			}
			m.v.DupsBy[what]++
			continue
		}
		m.first[id] = d
		if _, ok := m.shardRead[d.Shard]; !ok {
			m.shardRead[d.Shard] = d.At
		}
		if m.firstKC[d.K] == nil {
			m.firstKC[d.K] = map[int]bool{}
		}
		if m.firstKC[d.K][d.C] {
			continue // a copy the output wrote twice
		}
		m.firstKC[d.K][d.C] = true
		// A nacking output writes a batch and then fails it: the later
		// record it wrote counts as delivered, and the earlier one comes
		// first after it, from this instance or from the next owner (seed
		// 5, 1 h: a14 wrote kpl-k0/3931 in a batch it nacked, and b16,
		// which took the shard, delivered kpl-k0/3929 first).
		if d.C <= m.last[d.K] && (nackers[d.Inst] || nackers[m.lastBy[d.K]]) {
			m.v.OrderByNacks++
		} else if d.C <= m.last[d.K] {
			m.v.OrderLive++
			m.fail("order", "%s/%d first delivered after %s/%d (%s, by %s at %s; %s/%d by %s)", d.K, d.C, d.K, m.last[d.K], d.Shard, d.Inst, m.s.at(d.At), d.K, m.last[d.K], m.lastBy[d.K])
		}
		if d.C > m.last[d.K] {
			m.last[d.K], m.lastBy[d.K] = d.C, d.Inst
		}
	}
	m.pending = append(m.pending[:0], m.pending[n:]...)
	if final {
		m.behindPoison()
	}
}

// reordered says whether d, an unmarked delivery of a record first
// delivered as f, is excused as stamped out of order (stampReordered):
// once per record, as a second unmarked delivery breaks the promise
// whatever the stamps.
func (m *monitor) reordered(id [2]string, windows []Window, f, d Delivery) bool {
	if m.reorderedOnce[id] || !stampReordered(windows, f, d) {
		return false
	}
	if m.reorderedOnce == nil {
		m.reorderedOnce = map[[2]string]bool{}
	}
	m.reorderedOnce[id] = true
	return true
}

// windowOf is the fault whose window holds first delivery f, "" for none.
func windowOf(windows []Window, f Delivery) string {
	for _, w := range windows {
		if w.Holds(f) {
			return w.What
		}
	}
	return ""
}

// behindPoison judges the marked duplicates outside every fault's window
// once every line is in. Every instance's output rejects the poison
// records, and the input then redelivers only them: records delivered
// beside or after one on its shard, while it waited for its attempts,
// stay behind the checkpoint until it is dead-lettered, and a hand-off
// meanwhile has the next owner deliver them again, marked
// (docs/poison-records.md, "Per-key order when the output names
// failures"). Such a duplicate is explained by a dead-lettered record of
// its shard at or before it, dead-lettered after its first delivery.
func (m *monitor) behindPoison() {
	m.s.mu.Lock()
	windows := append([]Window(nil), m.s.windows...)
	m.s.mu.Unlock()
	// The hand-overs tell a poison record read again after it was given
	// up (poisonHolds).
	lines := append(append([]Delivery(nil), m.all...), m.handovers...)
	held := poisonHolds(lines)
	for _, fd := range m.behind {
		f, d := fd[0], fd[1]
		// A fault that was still going on when the duplicate was first
		// judged has its window now.
		what := windowOf(windows, f)
		if what == "" && held(f) {
			what = behindPoisonKind
		}
		if what == "" {
			m.v.DupsOutside++
			m.v.noteOutside(f, d)
			m.fail("duplicates", "%s/%d of %s (seq %s) first delivered by %s at %s, again by %s at %s, outside every fault's window",
				d.K, d.C, d.Shard, d.Seq, f.Inst, m.s.at(f.At), d.Inst, m.s.at(d.At))
			what = "no fault"
		}
		m.v.DupsBy[what]++
	}
	m.behind = nil
	// The end's table (Check) judges duplicates by windows: a first
	// delivery behind a poison record has a window of its own, the
	// narrowest, whether or not a fault's window holds it too. A record
	// handed over behind a poison record and then caught by a fault comes
	// twice, once for each (failover-sentinel-unacked soak, seed 5: a
	// hand-off during the replication hold, then the promotion's lost
	// lease, was one over the promotion's bound).
	m.explained = poisonWindows(lines)
}

// rss checks each live instance's resident set against its budget plus
// the margin.
func (m *monitor) rss() {
	limit := m.s.budget()>>20 + rssMarginMiB
	m.s.mu.Lock()
	insts := make([]*incarnation, 0, len(m.s.instances))
	for _, in := range m.s.instances {
		insts = append(insts, in)
	}
	m.s.mu.Unlock()
	for _, in := range insts {
		select {
		case <-in.done:
			m.s.smu.Lock()
			ours := m.s.stopped[in.name]
			m.s.stopped[in.name] = true // reported once
			m.s.smu.Unlock()
			if !ours {
				m.fail("process", "%s exited on its own (%v); see %s.log", in.name, in.err, in.name)
			}
			continue
		default:
		}
		mib := rssMiB(in.cmd.Process.Pid)
		m.v.PeakRSSMiB = max(m.v.PeakRSSMiB, mib)
		if mib > limit && !m.rssOver[in.name] {
			m.rssOver[in.name] = true
			m.v.RSSBreaches++
			m.fail("memory", "%s holds %d MiB, over its budget plus margin (%d MiB)", in.name, mib, limit)
		}
	}
}

// liveness: the oldest record of each shard not yet delivered was seen in
// the stream, or the last fault on its stream ended, at most livenessBound
// ago.
func (m *monitor) liveness(now time.Time) {
	gone := m.goneLabels()
	for _, id := range m.sh.order {
		if label, _, _ := strings.Cut(id, "/"); gone[label] {
			continue // judged when it was deleted (streamsClass)
		}
		ss := m.sh.shards[id]
		moved := false
		for ss.next < len(ss.recs) {
			if !m.done(id, ss.recs[ss.next].Seq) {
				break
			}
			ss.next++
			moved = true
		}
		if moved {
			m.breached[id] = false
			delete(m.heldAtPoison, id)
		}
		if ss.next >= len(ss.recs) || m.breached[id] {
			continue
		}
		stream, _, _ := strings.Cut(id, "/")
		quiet, ok := m.s.quietSince(stream)
		if !ok {
			continue
		}
		from := ss.seenAt[ss.next]
		if quiet.After(from) {
			from = quiet
		}
		if now.Sub(from) > livenessBound && !m.moving(id, now) {
			// Held at a poison record its holder could not charge, and
			// still hands over (the backoff tops at 5 s; the hand-overs
			// come in holdBack late): the documented limit, not a stall.
			// Judged again on every tick, counted once: a holder that
			// stops handing it over leaves the shard stuck.
			if _, _, lastHandover, held := heldBehindPoison(ss.recs[ss.next:], func(seq string) bool { return m.done(id, seq) },
				m.handovers, m.all); held && now.Sub(lastHandover) <= poisonRetryBound {
				if !m.heldAtPoison[id] {
					m.heldAtPoison[id] = true
					m.v.LivenessBehindPoison++
				}
				continue
			}
			m.breached[id] = true
			m.v.Liveness++
			r := ss.recs[ss.next]
			m.fail("liveness", "%s: record %s (%s/%d), in the stream since %s, not delivered %v after %s",
				id, r.Seq, r.K, r.C, m.s.at(ss.seenAt[ss.next]), livenessBound, m.s.at(from))
		}
	}
}

// done says whether a record was delivered or written to a dead letter.
func (m *monitor) done(shard, seq string) bool {
	_, delivered := m.first[[2]string{shard, seq}]
	return delivered || m.dead[[2]string{shard, seq}]
}
