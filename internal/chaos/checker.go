package chaos

import (
	"fmt"
	"sort"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/connect-kinesis/connect-kinesis/internal/consumer"
)

// Record is one record as it sits in the stream, read from the emulator
// directly (behind the proxy) after the run: the ground truth.
type Record struct {
	Shard, Seq string
	K          string
	C          int
	Poison     bool // the producer marked it for the pipeline to reject
}

// Window is a span of the run in which duplicates are expected: the end of a
// killed instance's life (what it delivered since its last commit is read
// again) or a Redis outage longer than the lease period.
type Window struct {
	What string
	Inst string // deliveries of this incarnation only; "" for every instance
	// Shards, when set, holds the shards (as deliveries name them) whose
	// deliveries the window covers; nil covers every shard.
	Shards   map[string]bool
	From, To time.Time
	// Unmarked says a duplicate of a first delivery it holds may come
	// without the redelivery mark: a Redis wipe while no live, running
	// instance held the shard, so nobody could write its mark back (the
	// mark's own limit, docs/poison-records.md, "Where the promise stops").
	Unmarked bool
	// After, on an Unmarked window, is the wipe's start: only a delivery
	// again at or after it is excused. One before it is not the wipe's
	// doing, even when the wipe's window holds its first delivery. On a
	// Reorders window it is when the holder was paused: only a later
	// record first delivered from then on (by the newcomer, from
	// `latest`) excuses; one before it the holder's own reader delivered.
	After time.Time
	// Kind names the window's class in the per-kind table ("kill",
	// "redis-flush, no live holder"); "" is What.
	Kind string
	// NoDups says the design allows the window no duplicate: a wipe of
	// Redis (FLUSHALL, or back empty) while its shards' holders were live
	// (each writes back where it is).
	// A duplicate only such a window holds is its breach.
	NoDups bool
	// Since, when set, holds for the shards it names only the deliveries
	// past its position: the group's checkpoint of each shard a killed
	// instance held, read just before the kill. What the instance
	// delivered up to its last commit is never read again.
	Since map[string]consumer.Position
	// Until, when set, holds for the shards it names only the deliveries
	// at or before its position: with Since, the records between two
	// checkpoints (the commits a replica promotion lost).
	Until map[string]consumer.Position
	// At is when the window's fault struck, for the report, when From is
	// not (a kill's window with Since reaches back to the soak's start).
	At time.Time
	// Resent says the window explains a duplicate its own instance (Inst)
	// delivered only when that instance's reader sent the record again
	// (kinesis_delivery_attempt above 1): a nacking output's window, which
	// lasts the whole run, explains a nacked batch sent again, not a read
	// of the shard again (after a FLUSHALL under that live holder, it
	// would hide every such duplicate). Another instance's duplicate is
	// explained as before: a nacked batch past the checkpoint goes to the
	// shard's next owner.
	Resent bool
	// Reorders says the window explains order, not duplicates: a first
	// delivery it holds that comes after a later record of its key first
	// delivered before the window opened. A holder that wakes after Redis
	// came back empty wins back, with its own position, the shards a
	// newcomer read on from `latest` meanwhile; what lay between is then
	// delivered (by the holder, or by whoever it hands the shard to) after
	// the newcomer's later records (docs/checkpointer.md, "Limits":
	// out-of-order keys, no loss).
	Reorders bool
	// Grace, on a Reorders window, is how long after From a later record
	// another instance first delivered still excuses: the newcomer learns
	// that the holder claimed its shards back only at its first store call
	// after the holder's re-seed, and meanwhile delivers the batch it had
	// fetched from `latest`. The holder's own later record excuses nothing
	// after it woke.
	Grace time.Duration
	// Holder, on a Reorders window, names the woken holder. It reads from
	// its own position, never from the newcomer's `latest`, so its later
	// record excuses nothing within Grace, even when another instance (to
	// which it handed the shard) delivers the earlier one.
	Holder string
}

// explains says whether the window may explain duplicate d of a record
// whose first delivery it holds.
func (w Window) explains(d Delivery) bool {
	if !w.Resent || d.Inst != w.Inst || d.Attempt == "" {
		return true
	}
	return d.Attempt != "1"
}

// Holds says whether first delivery d falls in the window.
func (w Window) Holds(d Delivery) bool {
	if (w.Inst != "" && w.Inst != d.Inst) || (w.Shards != nil && !w.Shards[d.Shard]) || d.At.Before(w.From) || d.At.After(w.To) {
		return false
	}
	p, err := consumer.ParsePosition(d.Seq)
	if cp, ok := w.Since[d.Shard]; ok && (err != nil || !positionBefore(cp, p)) {
		return false
	}
	if cp, ok := w.Until[d.Shard]; ok && (err != nil || positionBefore(cp, p)) {
		return false
	}
	return true
}

// Kill is a SIGKILL of an incarnation, with the shards it owned then.
type Kill struct {
	Inst   string
	At     time.Time
	Shards []string
}

// Table is the checker's verdict.
type Table struct {
	// Producer side: what the generator handed to the output, what the
	// stream holds.
	Produced       int
	StreamRecords  int
	OutputAccepted int // distinct (key, counter) in the stream
	OutputLost     int // produced but not in the stream
	OutputDups     int // stream records beyond the first of a (key, counter)
	// OutputOrderViolations are stream records (read parents first, each
	// shard in sequence order), first copies of their message, whose
	// counter is below one already read for their key: the output let a
	// key's records overtake each other.
	OutputOrderViolations int

	// Consumer side.
	Deliveries      int
	DeliveredUnique int // distinct stream records (shard, sequence) delivered
	InputLost       int // stream records never delivered
	Duplicates      int // deliveries of a stream record beyond its first
	// Windows are the duplicates of each fault window against that
	// window's own bound (windows.go); WindowBreaches how many windows went
	// over theirs.
	Windows        []WindowTally
	WindowBreaches int
	// DupsOutsideWindows are duplicates whose first delivery was in no
	// window: a graceful hand-off or a rebalance delivered something twice.
	DupsOutsideWindows int
	OrderViolations    int // first deliveries of a key not strictly increasing
	// OrderByNacks are such first deliveries where the record or the
	// later one before it was delivered by an incarnation whose output
	// nacks: it wrote the later record in a batch it then failed, and the
	// earlier one came after it. Not violations: Benthos hands the failed
	// batch back whole (the soak's output class).
	OrderByNacks int
	// OrderWonBack are such first deliveries that a Reorders window
	// explains: not violations, the documented cost of a holder winning
	// its shards back.
	OrderWonBack int
	// Poison are stream records the producer marked for the pipeline to
	// reject; DeadLettered the stream records the inputs wrote to their
	// dead letter (each counts as done, not lost); DeadLetteredGood those
	// of them that were not poison: a record given up that the pipeline
	// would have taken.
	Poison, DeadLettered, DeadLetteredGood int
	// HeldBehindPoison are stream records never delivered because their
	// shard waits at a poison record whose failures its holder could not
	// charge, nothing else of its input being processed after it
	// (heldBehindPoison): uncommitted, not lost, and an excuse on the
	// verdict line.
	HeldBehindPoison int
	// DeadLetterAttempts are the fewest and most deliveries
	// (kinesis_delivery_attempt) a record had when it was dead-lettered.
	DeadLetterAttempts [2]int
	EndToEndLost       int // produced (key, counter) never delivered
	MaxFailoverGap     time.Duration
	Kills              int

	// Marks counts the redelivery mark (marks.go): UnmarkedDups, the
	// deliveries of a record delivered before in the run that do not carry
	// kinesis_redelivered "true", must be 0.
	Marks

	// Injected is a one-line summary of the faults the proxy injected.
	Injected string
	// EFO says the inputs read with enhanced fan-out, past the fault proxy.
	EFO bool
	// FanOut, Incarnations: with the soak's efo class, how many of the
	// incarnations read with enhanced fan-out (past the fault proxy), of
	// how many started.
	FanOut, Incarnations int
	// Instances is how many input processes read (0 is read as 3), and
	// Standbys, with Config.Standbys, how many of them held no lease just
	// before Redis went down to come back empty (0: not measured).
	Instances, Standbys int
	// ACLRefusals are what Redis refused the inputs, which run as the
	// shipped ACL file's input user (acl.go).
	ACLRefusals []string

	// Scenario is what the phase saw of its own case (a parent closed
	// under a paused holder, the output's outage); empty for the others.
	Scenario string

	// Examples of what went wrong, for the report.
	Problems []string
	// NoVerdict leaves the verdict row out: the soak judges more than the
	// table (liveness, fencing, memory) and prints the one verdict itself.
	NoVerdict bool
}

// OK is the pass mark: nothing lost, per-key order kept, duplicates within
// the design's bound, and every one of them marked as a redelivery.
func (t Table) OK() bool {
	return t.InputLost == 0 && t.EndToEndLost == 0 && t.OutputLost == 0 && t.OutputOrderViolations == 0 &&
		t.OrderViolations == 0 && t.WindowBreaches == 0 && t.DupsOutsideWindows == 0 && len(t.ACLRefusals) == 0 &&
		t.UnmarkedDups == 0 && t.DeadLetteredGood == 0
}

// String renders the one table.
func (t Table) String() string {
	var b strings.Builder
	w := tabwriter.NewWriter(&b, 0, 0, 2, ' ', 0)
	row := func(k string, v any) { fmt.Fprintf(w, "  %s\t%v\n", k, v) }
	fmt.Fprintln(w, "output (generate -> kinesis output -> fault proxy -> stream)")
	row("sent", t.Produced)
	row("accepted (unique in stream)", t.OutputAccepted)
	row("lost by the output", t.OutputLost)
	row("duplicated by the output", t.OutputDups)
	row("per-key order violations in the stream", t.OutputOrderViolations)
	instances := t.Instances
	if instances == 0 {
		instances = 3
	}
	if t.EFO {
		fmt.Fprintf(w, "input (stream -> %d kinesis input processes, enhanced fan-out)\n", instances)
	} else if t.FanOut > 0 {
		fmt.Fprintf(w, "input (stream -> fault proxy -> %d kinesis input processes; %d of %d incarnations read with enhanced fan-out, past the proxy)\n", instances, t.FanOut, t.Incarnations)
	} else {
		fmt.Fprintf(w, "input (stream -> fault proxy -> %d kinesis input processes)\n", instances)
	}
	if t.Standbys != 0 {
		row("standbys when Redis went down", t.Standbys)
	}
	if t.Scenario != "" {
		row("scenario", t.Scenario)
	}
	row("produced (stream records)", t.StreamRecords)
	row("delivered unique", t.DeliveredUnique)
	row("lost", t.InputLost)
	if t.Poison > 0 || t.DeadLettered > 0 {
		row("dead-lettered (not lost)", fmt.Sprintf("%d of %d poison records, after %d to %d deliveries (good records dead-lettered %d)",
			t.DeadLettered, t.Poison, t.DeadLetterAttempts[0], t.DeadLetterAttempts[1], t.DeadLetteredGood))
	}
	row("duplicates", fmt.Sprintf("%d (windows over their own bound %d of %d, outside every window %d)", t.Duplicates, t.WindowBreaches, len(t.Windows), t.DupsOutsideWindows))
	switch {
	case t.OrderByNacks > 0:
		row("per-key order violations", fmt.Sprintf("%d (and %d after a nacking output's delivery: not violations)", t.OrderViolations, t.OrderByNacks))
	case t.OrderWonBack > 0:
		row("per-key order violations", fmt.Sprintf("%d (and %d on a woken holder's shards won back from a newcomer: not violations)", t.OrderViolations, t.OrderWonBack))
	default:
		row("per-key order violations", t.OrderViolations)
	}
	row("unmarked duplicates (no kinesis_redelivered: true)", t.Marks.String())
	row("max failover gap", fmt.Sprintf("%v (%d kills)", t.MaxFailoverGap.Round(time.Millisecond), t.Kills))
	row("end-to-end lost (sent, never delivered)", t.EndToEndLost)
	row("Redis ACL refusals (input user)", len(t.ACLRefusals))
	verdict := "PASS"
	if !t.OK() {
		verdict = "FAIL"
	}
	if t.Injected != "" {
		row("faults injected", t.Injected)
	}
	if !t.NoVerdict {
		row("verdict", verdict)
	}
	_ = w.Flush()
	for _, p := range append(t.Problems, t.ACLRefusals...) {
		fmt.Fprintf(&b, "  ! %s\n", p)
	}
	return b.String()
}

// maxProblems keeps the report short.
const maxProblems = 10

// Check compares what was produced (counters 1..perKey[k] for each key), the
// stream's content and the deliveries, in the order each instance wrote them.
// nackers are the incarnations whose output nacks (nil: none).
func Check(perKey map[string]int, stream []Record, deliveries []Delivery, windows []Window, kills []Kill, nackers map[string]bool) Table {
	var t Table
	deliveries, handovers := splitHandovers(deliveries)
	windows, reorders := splitReorders(windows)
	problem := func(format string, args ...any) {
		if len(t.Problems) < maxProblems {
			t.Problems = append(t.Problems, fmt.Sprintf(format, args...))
		}
	}
	type kc struct {
		k string
		c int
	}
	type rid struct{ shard, seq string }

	for _, n := range perKey {
		t.Produced += n
	}
	t.StreamRecords = len(stream)
	inStream := map[kc]int{}
	streamIDs := map[rid]bool{}
	for _, r := range stream {
		inStream[kc{r.K, r.C}]++
		streamIDs[rid{r.Shard, r.Seq}] = true
	}
	var dead deadLetters
	deliveries, dead = splitDeadLetters(stream, deliveries, &t, problem)
	// Only a message's first copy in the stream is checked for order: a
	// request whose answer was lost is sent again, and when it held an
	// aggregated record with two messages of a key, the copy puts the first
	// after the second.
	highest, seenKC := map[string]int{}, map[kc]bool{}
	for _, r := range stream {
		if seenKC[kc{r.K, r.C}] {
			continue
		}
		seenKC[kc{r.K, r.C}] = true
		if r.C < highest[r.K] {
			t.OutputOrderViolations++
			problem("output order: %s/%d is in the stream after %s/%d (shard %s)", r.K, r.C, r.K, highest[r.K], r.Shard)
		}
		highest[r.K] = max(highest[r.K], r.C)
	}
	t.OutputAccepted = len(inStream)
	t.OutputDups = len(stream) - len(inStream)
	for k, n := range perKey {
		for c := 1; c <= n; c++ {
			if inStream[kc{k, c}] == 0 {
				t.OutputLost++
				problem("output lost %s/%d: never written to the stream", k, c)
			}
		}
	}

	// Deliveries in time order: each instance's file is in its own order,
	// and instances are interleaved by their timestamps.
	sort.SliceStable(deliveries, func(i, j int) bool { return deliveries[i].At.Before(deliveries[j].At) })
	t.Deliveries = len(deliveries)
	first := map[rid]Delivery{}
	firstKC := map[kc]bool{}
	last := map[string]int{}
	lastBy := map[string]string{}
	lastAt := map[string]time.Time{}
	var dups []Delivery
	for _, d := range deliveries {
		id := rid{d.Shard, d.Seq}
		if _, seen := first[id]; seen {
			dups = append(dups, d)
			continue
		}
		first[id] = d
		if firstKC[kc{d.K, d.C}] {
			continue // a copy the output wrote twice: not an order question
		}
		firstKC[kc{d.K, d.C}] = true
		switch {
		case d.C <= last[d.K] && (nackers[d.Inst] || nackers[lastBy[d.K]]):
			t.OrderByNacks++
		case d.C <= last[d.K] && reordered(reorders, d, lastAt[d.K], lastBy[d.K]):
			t.OrderWonBack++
		case d.C <= last[d.K]:
			t.OrderViolations++
			problem("order: %s/%d first delivered after %s/%d (shard %s, by %s; %s/%d by %s)", d.K, d.C, d.K, last[d.K], d.Shard, d.Inst, d.K, last[d.K], lastBy[d.K])
		default:
			last[d.K], lastBy[d.K], lastAt[d.K] = d.C, d.Inst, d.At
		}
	}
	t.DeliveredUnique = len(first)
	t.Duplicates = len(dups)
	held, heldKC := map[rid]bool{}, map[kc]bool{}
	byShard, shardOrder := map[string][]Record{}, []string{}
	for _, r := range stream {
		if byShard[r.Shard] == nil {
			shardOrder = append(shardOrder, r.Shard)
		}
		byShard[r.Shard] = append(byShard[r.Shard], r)
	}
	for _, shard := range shardOrder {
		recs := byShard[shard]
		i, holder, lastAt, ok := heldBehindPoison(recs,
			func(seq string) bool { _, d := first[rid{shard, seq}]; return d || dead.has(shard, seq) },
			handovers, deliveries)
		if !ok || killedAfter(kills, holder, lastAt) {
			// A holder killed after its last hand-over, and nobody
			// handing the record over since, left the shard unread: not
			// the documented limit, which keeps sending it again.
			continue
		}
		for _, r := range recs[i:] {
			if _, d := first[rid{shard, r.Seq}]; !d && !dead.has(shard, r.Seq) && !held[rid{shard, r.Seq}] {
				held[rid{shard, r.Seq}], heldKC[kc{r.K, r.C}] = true, true
				t.HeldBehindPoison++
			}
		}
		problem("held, not lost: shard %s waits at poison record %s/%d (seq %s) that its holder could not charge max_attempts times, too little else of its input processed after handing it over; %d records behind it uncommitted", shard, recs[i].K, recs[i].C, recs[i].Seq, len(recs)-i)
	}
	for id := range streamIDs {
		if _, ok := first[id]; !ok && !dead.has(id.shard, id.seq) && !held[id] {
			t.InputLost++
			problem("input lost record %s of shard %s", id.seq, id.shard)
		}
	}
	for k, n := range perKey {
		for c := 1; c <= n; c++ {
			if !firstKC[kc{k, c}] && !dead.hasMessage(k, c) && inStream[kc{k, c}] > 0 && !heldKC[kc{k, c}] {
				t.EndToEndLost++
			}
		}
	}
	t.EndToEndLost += t.OutputLost

	// Each fault window's duplicates against its own bound (windows.go).
	firstByID := make(map[[2]string]Delivery, len(first))
	for id, d := range first {
		firstByID[[2]string{id.shard, id.seq}] = d
	}
	t.Windows = tallyWindows(windows, firstByID, dups)
	t.WindowBreaches = windowBreaches(t.Windows)
	for _, w := range t.Windows {
		if w.Over > 0 {
			problem("duplicates over a window's own bound: %s, %d duplicates, bound %d, %d over", w.What, w.Dups, w.Bound, w.Over)
		}
	}
	for _, d := range dups {
		f := first[rid{d.Shard, d.Seq}]
		inWindow := false
		for _, w := range windows {
			if w.Holds(f) {
				inWindow = true
				break
			}
		}
		if !inWindow {
			t.DupsOutsideWindows++
			problem("duplicate outside every expected window: %s/%d shard %s first by %s at %s, again by %s",
				d.K, d.C, d.Shard, f.Inst, f.At.Format("15:04:05.000"), d.Inst)
		}
	}

	// Last, so that its examples do not crowd out the others'.
	t.Marks = countMarks(deliveries, windows, problem)

	// Failover gap: from a kill to the next delivery of a shard the killed
	// incarnation owned.
	t.Kills = len(kills)
	for _, k := range kills {
		owned := map[string]bool{}
		for _, s := range k.Shards {
			owned[s] = true
		}
		if len(owned) == 0 {
			continue
		}
		var gap time.Duration
		for _, d := range deliveries {
			if owned[d.Shard] && d.At.After(k.At) && d.Inst != k.Inst {
				gap = d.At.Sub(k.At)
				break
			}
		}
		t.MaxFailoverGap = max(t.MaxFailoverGap, gap)
	}
	return t
}

// killedAfter says incarnation inst was killed after t.
func killedAfter(kills []Kill, inst string, t time.Time) bool {
	for _, k := range kills {
		if k.Inst == inst && k.At.After(t) {
			return true
		}
	}
	return false
}

// splitReorders separates the Reorders windows, which explain order, from
// those that explain duplicates.
func splitReorders(all []Window) (dups, reorders []Window) {
	for _, w := range all {
		if w.Reorders {
			reorders = append(reorders, w)
		} else {
			dups = append(dups, w)
		}
	}
	return dups, reorders
}

// reordered says whether one of the Reorders windows holds first
// delivery d, which came after a later record of its key first delivered
// at laterAt by laterBy, not before the holder was paused (After) and
// before that window opened, or by another instance than d's and the
// holder's within the window's Grace after it opened.
func reordered(windows []Window, d Delivery, laterAt time.Time, laterBy string) bool {
	for _, w := range windows {
		if !w.Holds(d) || laterAt.Before(w.After) {
			continue
		}
		if laterAt.Before(w.From) || (laterBy != d.Inst && laterBy != w.Holder && laterAt.Before(w.From.Add(w.Grace))) {
			return true
		}
	}
	return false
}
