package chaos

import (
	"cmp"
	"fmt"
	"slices"
	"strings"
	"text/tabwriter"
	"time"
)

// WindowTally is one fault window's duplicates against its own bound.
//
// The design bounds the duplicates of each fault, not of a run: a kill
// delivers again what the instance delivered since its last commit plus
// what it had in flight, which is what the kill's window holds; a wipe
// whose shards had a live holder delivers nothing again, as the holder
// writes back where it is; a wipe of a shard no live instance held reads
// it again from the group's start position, every delivery of it so far.
// So each window allows each record it holds to come once more (Bound
// counts them), a window marked NoDups allows none, and a duplicate past
// that is its window's breach. A run-wide sum cannot fail: one window's
// excess hides in another's slack (seed 18, 1 h: 86,644 duplicates
// against a summed bound of 5,186,518, most of it the nacking outputs'
// windows, which last the whole run).
type WindowTally struct {
	What, Kind string
	From, To   time.Time
	// At is when the window's fault struck: Window.At, else the wipe's
	// start for a wipe's window over every delivery so far (Window.After),
	// else From.
	At time.Time
	// Bound is how many duplicates the window allows: its first
	// deliveries, each once; 0 for a NoDups window.
	Bound int
	// Dups are the duplicates the window explains, Over those of them past
	// its bound (a record again for the second time in the window, or any
	// in a NoDups window that no other window explains).
	Dups, Over int
	// OverSample tells the story of the first few duplicates past the
	// bound: the record, its first delivery and the duplicate (instance
	// and time), so a breach in a run nobody watched can be read back.
	OverSample []string
}

// overSampleMax is how many duplicates past its bound a window tells.
const overSampleMax = 3

// kind names w's class for the per-kind table: Kind when set, else What.
func (w Window) kind() string { return cmp.Or(w.Kind, w.What) }

// tallyWindows judges each duplicate against the windows that hold its
// first delivery, in time order. Each (window, record) pair allows one
// duplicate; the narrowest window holding the record with its allowance
// unused explains it, the most specific fault (a kill's few seconds before
// a nacking output's whole run). A duplicate with every holding window's
// allowance spent is counted, and breached, in the narrowest window
// holding it that allows any, else in the narrowest holding it. Duplicates
// no window holds are left to the caller (outside every window). The
// windows come back in their order.
func tallyWindows(windows []Window, first map[[2]string]Delivery, dups []Delivery) []WindowTally {
	out := make([]WindowTally, len(windows))
	for i, w := range windows {
		out[i] = WindowTally{What: w.What, Kind: w.kind(), From: w.From, To: w.To, At: cmp.Or(w.At, w.After, w.From)}
	}
	for _, f := range first {
		for i, w := range windows {
			if !w.NoDups && w.Holds(f) {
				out[i].Bound++
			}
		}
	}
	narrowest := make([]int, len(windows))
	for i := range narrowest {
		narrowest[i] = i
	}
	slices.SortStableFunc(narrowest, func(a, b int) int {
		return cmp.Compare(windows[a].To.Sub(windows[a].From), windows[b].To.Sub(windows[b].From))
	})
	type use struct {
		w  int
		id [2]string
	}
	used := map[use]bool{}
	// last is each record's last delivery: the first, then the
	// duplicates judged so far (dups come in time order).
	last := map[[2]string]Delivery{}
	for _, d := range dups {
		id := [2]string{d.Shard, d.Seq}
		f, ok := first[id]
		if !ok {
			continue
		}
		prev, seen := last[id]
		if !seen {
			prev = f
		}
		last[id] = d
		// A poison record's window explains a hand-off no fault caused:
		// a duplicate by another instance than the record's last
		// delivery, with no fault holding the record struck in between
		// (its allowance unused). Else a kill of the holder would
		// explain two duplicates, one under each window, and the next
		// owner's second one would hide.
		handOff := func() bool {
			if d.Inst == prev.Inst {
				return false
			}
			for i, w := range windows {
				at := out[i].At
				if w.kind() != behindPoisonKind && !w.NoDups && !used[use{i, id}] && w.Holds(f) && w.explains(d) && at.After(prev.At) && !at.After(d.At) {
					return false
				}
			}
			return true
		}
		explained, fallback := -1, -1
		for _, i := range narrowest {
			w := windows[i]
			if !w.Holds(f) {
				continue
			}
			if !w.NoDups && !used[use{i, id}] && w.explains(d) && (w.kind() != behindPoisonKind || handOff()) {
				explained = i
				break
			}
			if fallback < 0 || (windows[fallback].NoDups && !w.NoDups) {
				fallback = i
			}
		}
		switch {
		case explained >= 0:
			used[use{explained, id}] = true
			out[explained].Dups++
		case fallback >= 0:
			t := &out[fallback]
			t.Dups++
			t.Over++
			if len(t.OverSample) < overSampleMax {
				t.OverSample = append(t.OverSample, fmt.Sprintf("%s %s first by %s at %s, again by %s at %s",
					d.Shard, d.Seq, f.Inst, f.At.Format("15:04:05.000"), d.Inst, d.At.Format("15:04:05.000")))
			}
		}
	}
	return out
}

// windowBreaches counts the windows over their own bound.
func windowBreaches(ts []WindowTally) int {
	n := 0
	for _, t := range ts {
		if t.Over > 0 {
			n++
		}
	}
	return n
}

// kindTally is one line of the per-kind table.
type kindTally struct {
	kind          string
	windows, dups int
	breaches      int
	largest       WindowTally // the window with the most duplicates
}

// byKind groups the tallies by kind, in the order kinds first appear.
func byKind(ts []WindowTally) []kindTally {
	var out []kindTally
	at := map[string]int{}
	for _, t := range ts {
		i, ok := at[t.Kind]
		if !ok {
			i = len(out)
			at[t.Kind] = i
			out = append(out, kindTally{kind: t.Kind, largest: t})
		}
		k := &out[i]
		k.windows++
		k.dups += t.Dups
		if t.Over > 0 {
			k.breaches++
		}
		if t.Dups > k.largest.Dups || (t.Dups == k.largest.Dups && t.Over > k.largest.Over) {
			k.largest = t
		}
	}
	slices.SortStableFunc(out, func(a, b kindTally) int { return strings.Compare(a.kind, b.kind) })
	return out
}

// WindowsTable renders one line per window kind: how many windows, their
// duplicates, the largest window's duplicates against its bound, and how
// many windows went over their bound. at renders when a window began
// (WindowTally.At).
func WindowsTable(ts []WindowTally, at func(time.Time) string) string {
	var b strings.Builder
	w := tabwriter.NewWriter(&b, 0, 0, 2, ' ', 0)
	fmt.Fprintln(w, "  window kind\twindows\tduplicates\tlargest (duplicates/bound)\tbreaches")
	for _, k := range byKind(ts) {
		fmt.Fprintf(w, "  %s\t%d\t%d\t%d/%d (%s at %s)\t%d\n", k.kind, k.windows, k.dups, k.largest.Dups, k.largest.Bound, k.largest.What, at(k.largest.At), k.breaches)
	}
	_ = w.Flush()
	return b.String()
}

// WindowLines renders every window with a duplicate, one line each: its
// duplicates against its own bound. The windows behind a poison record,
// one a record, are left to the per-kind table but for a breach.
func WindowLines(ts []WindowTally, at func(time.Time) string) []string {
	var out []string
	for _, t := range ts {
		if t.Dups == 0 || (t.Kind == behindPoisonKind && t.Over == 0) {
			continue
		}
		line := fmt.Sprintf("%s %s: %d duplicates, bound %d", at(t.At), t.What, t.Dups, t.Bound)
		if t.Over > 0 {
			line += fmt.Sprintf(", %d OVER (%s)", t.Over, strings.Join(t.OverSample, "; "))
		}
		out = append(out, line)
	}
	return out
}
