package chaos

import (
	"cmp"
	"fmt"
	"slices"
	"strconv"
	"strings"
)

// Marks is what the deliveries say about the redelivery mark
// (docs/poison-records.md, "The redelivery mark"): no record delivered
// before may arrive without kinesis_redelivered "true".
type Marks struct {
	// UnmarkedDups are deliveries of a record (stream and shard, sequence
	// and sub-sequence number) that was delivered before in the run, in
	// time order, and that do not carry kinesis_redelivered "true". The
	// promise is broken by each one. A delivery's time is stamped by its
	// pipeline, which may run a batch some time after the input handed it
	// over (a busy pipeline thread); UnmarkedSure counts, per record, its
	// unmarked deliveries beyond one, which break the promise whatever the
	// order of the stamps.
	UnmarkedDups, UnmarkedSure int
	// Marked are deliveries that carry the mark; MarkedFirst those of them
	// that are a record's first delivery in the run, which the promise
	// allows (an owner stored how far it would deliver and died before it
	// did, or its delivery never reached the file).
	Marked, MarkedFirst int
	// Unset are deliveries without kinesis_redelivered at all: the input
	// sets the key only on a marked record. Each of them that is a
	// duplicate counts as unmarked.
	Unset int
	// MaxAttempt is the highest kinesis_delivery_attempt seen.
	MaxAttempt int
	// Excused are unmarked duplicates whose first delivery a window that
	// allows them holds (Window.Unmarked): not counted in UnmarkedDups.
	Excused int
	// Reordered are unmarked duplicates stamped after a marked delivery
	// of the record by an instance that was paused across both stamps
	// (stampReordered): not counted in UnmarkedDups.
	Reordered int
	// Groups are the unmarked duplicates by shard and by the incarnations
	// that delivered them first and again, the largest first (at most
	// maxMarkGroups), so that a long run's report says where to look
	// without the delivery files.
	Groups []MarkGroup
}

// MarkGroup is a run of unmarked duplicates: shard's records first
// delivered by First, again by Again without the mark.
type MarkGroup struct {
	Shard, First, Again string
	Count               int
	// Example is the group's first such delivery.
	Example string
}

// maxMarkGroups keeps the report short.
const maxMarkGroups = 8

// dupGroups tallies duplicates by shard and by the incarnations that
// delivered them first and again.
type dupGroups map[[3]string]*MarkGroup

// add counts d, a delivery again of first.
func (gs dupGroups) add(first, d Delivery) {
	key := [3]string{d.Shard, first.Inst, d.Inst}
	g := gs[key]
	if g == nil {
		g = &MarkGroup{Shard: d.Shard, First: first.Inst, Again: d.Inst,
			Example: fmt.Sprintf("%s/%d at %s, again at %s", d.K, d.C, first.At.Format("15:04:05.000"), d.At.Format("15:04:05.000"))}
		gs[key] = g
	}
	g.Count++
}

// largest returns the groups, the largest first, at most maxMarkGroups.
func (gs dupGroups) largest() []MarkGroup {
	out := make([]MarkGroup, 0, len(gs))
	for _, g := range gs {
		out = append(out, *g)
	}
	slices.SortFunc(out, func(a, b MarkGroup) int {
		return cmp.Or(b.Count-a.Count, strings.Compare(a.Example, b.Example))
	})
	if len(out) > maxMarkGroups {
		out = out[:maxMarkGroups]
	}
	return out
}

// describeGroups renders groups for the report.
func describeGroups(groups []MarkGroup) string {
	parts := make([]string, 0, len(groups))
	for _, g := range groups {
		parts = append(parts, fmt.Sprintf("%d of %s by %s then %s (first: %s)", g.Count, g.Shard, g.First, g.Again, g.Example))
	}
	return strings.Join(parts, "; ")
}

// String renders the count for the table, with what explains it.
func (m Marks) String() string {
	s := fmt.Sprintf("%d (%d whatever the order of the stamps; marked deliveries %d, of them first deliveries %d; highest delivery attempt %d)",
		m.UnmarkedDups, m.UnmarkedSure, m.Marked, m.MarkedFirst, m.MaxAttempt)
	if m.Unset > 0 {
		s += fmt.Sprintf("; %d deliveries without the key", m.Unset)
	}
	if m.Excused > 0 {
		s += fmt.Sprintf("; %d more after a wipe no live holder saw (the mark's limit)", m.Excused)
	}
	if m.Reordered > 0 {
		s += fmt.Sprintf("; %d more stamped after a marked delivery by an instance paused across both (handed over before the pause)", m.Reordered)
	}
	if len(m.Groups) > 0 {
		s += "; largest groups: " + describeGroups(m.Groups)
	}
	return s
}

// countMarks walks the deliveries, in time order, and counts those of a
// record seen before that lack the mark, but for those whose first
// delivery an Unmarked window holds. problem reports examples.
func countMarks(deliveries []Delivery, windows []Window, problem func(format string, args ...any)) Marks {
	var m Marks
	seen := make(map[[2]string]Delivery, len(deliveries))
	unmarked := map[[2]string]int{}
	groups := dupGroups{}
	for _, d := range deliveries {
		id := [2]string{d.Shard, d.Seq}
		prev, again := seen[id]
		if !again {
			seen[id] = d
		}
		if n, err := strconv.Atoi(d.Attempt); err == nil {
			m.MaxAttempt = max(m.MaxAttempt, n)
		}
		switch d.Redelivered {
		case "true":
			m.Marked++
			if !again {
				m.MarkedFirst++
			}
			continue
		case "":
			m.Unset++
		}
		if unmarked[id]++; unmarked[id] > 1 {
			m.UnmarkedSure++
		}
		switch {
		case again && unmarkedAllowed(windows, prev, d):
			m.Excused++
		case again && unmarked[id] == 1 && stampReordered(windows, prev, d):
			m.Reordered++
		case again:
			m.UnmarkedDups++
			groups.add(prev, d)
			problem("unmarked duplicate: %s/%d of shard %s (seq %s) first delivered by %s at %s, again by %s at %s with kinesis_redelivered %q (attempt %q)",
				d.K, d.C, d.Shard, d.Seq, prev.Inst, prev.At.Format("15:04:05.000"), d.Inst, d.At.Format("15:04:05.000"), d.Redelivered, d.Attempt)
		}
	}
	m.Groups = groups.largest()
	return m
}

// stampReordered says whether d, an unmarked delivery of a record whose
// earlier-stamped delivery first carried the mark, may have been handed
// over before first: d's instance was paused, and the window of that
// pause holds both stamps. A delivery is stamped by its pipeline, and a
// batch the input handed over just before SIGSTOP waits in the pipeline
// (a busy thread) until SIGCONT; meanwhile the lease ran out, another
// instance took the shard, read the paused one's mark and delivered the
// record marked, earlier by the stamps (seed 5, 1 h: c46 handed over
// kpl-k0/8396 and was paused, a33 delivered it marked at 42m21.2s, and
// c46's pipeline stamped its copy at SIGCONT, half a second later). The
// input refuses a batch past its lease's local deadline at the hand-over
// (Delivery.Admit), so after SIGCONT only a batch handed over before it
// can come. A record's second unmarked delivery is counted whatever the
// stamps (UnmarkedSure).
func stampReordered(windows []Window, first, d Delivery) bool {
	if first.Redelivered != "true" || first.Inst == d.Inst {
		return false
	}
	for _, w := range windows {
		if w.What == "pause "+d.Inst && w.Holds(first) && w.Holds(d) {
			return true
		}
	}
	return false
}

// unmarkedAllowed says whether a window that allows unmarked duplicates
// holds first delivery f, and d, its delivery again, came after the wipe
// began.
func unmarkedAllowed(windows []Window, f, d Delivery) bool {
	for _, w := range windows {
		if w.Unmarked && w.Holds(f) && !d.At.Before(w.After) {
			return true
		}
	}
	return false
}
