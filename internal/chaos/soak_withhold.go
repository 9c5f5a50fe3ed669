package chaos

import (
	"slices"
	"sort"
	"strings"
	"time"
)

// withholding is a fault during which the input delivers nothing by
// design: Redis out of reach (restarted, emptied, flushed, paused,
// stalled; inst ""), or one incarnation cut off from Redis or paused
// (inst). Its readers hold their records until a renewal confirms their
// leases, so it lasts until a lease period after the fault's end; to is
// zero while the fault is under way.
type withholding struct {
	what, inst string
	from, to   time.Time
}

// withholdBegin notes the start of such a fault; withholdEnd its end (the
// first call counts).
func (s *soak) withholdBegin(what, inst string) *withholding {
	w := &withholding{what: what, inst: inst, from: time.Now()}
	s.smu.Lock()
	s.withholdings = append(s.withholdings, w)
	s.smu.Unlock()
	return w
}

func (s *soak) withholdEnd(w *withholding) {
	s.smu.Lock()
	if w.to.IsZero() {
		w.to = time.Now().Add(s.plan.LeasePeriod)
	}
	s.smu.Unlock()
}

// withheldFor is how much of [from, to] faults withheld inc's deliveries
// (overlaps counted once), and which faults (each name once, in order of
// their start).
func (s *soak) withheldFor(inc string, from, to time.Time) (time.Duration, []string) {
	type span struct{ a, b time.Time }
	var spans []span
	var whats []string
	s.smu.Lock()
	for _, w := range s.withholdings {
		if w.inst != "" && w.inst != inc {
			continue
		}
		a, b := w.from, w.to
		if b.IsZero() {
			b = to
		}
		if a.Before(from) {
			a = from
		}
		if b.After(to) {
			b = to
		}
		if b.After(a) {
			spans = append(spans, span{a, b})
			if !slices.Contains(whats, w.what) {
				whats = append(whats, w.what)
			}
		}
	}
	s.smu.Unlock()
	sort.Slice(spans, func(i, j int) bool { return spans[i].a.Before(spans[j].a) })
	var total time.Duration
	var cur span
	for i, sp := range spans {
		switch {
		case i == 0:
			cur = sp
		case !sp.a.After(cur.b):
			if sp.b.After(cur.b) {
				cur.b = sp.b
			}
		default:
			total += cur.b.Sub(cur.a)
			cur = sp
		}
	}
	if len(spans) > 0 {
		total += cur.b.Sub(cur.a)
	}
	return total, whats
}

// running says whether incarnation inc is its instance's running one.
func (s *soak) running(inc string) bool {
	in := s.live(baseName(inc))
	return in != nil && in.name == inc
}

// baseName is the instance of incarnation inc ("b19": "b").
func baseName(inc string) string { return strings.TrimRight(inc, "0123456789") }
