package chaos

import (
	"fmt"
	"strings"
	"time"
)

// Verdict is a soak's outcome: the checker's table at the end, and what
// the monitor found while the soak ran.
type Verdict struct {
	Seed     uint64
	Duration time.Duration
	Table    Table

	// While it ran.
	DupsOutside int // duplicates no fault's window explains
	// outside groups DupsOutside by shard and by the incarnations that
	// delivered them first and again.
	outside   dupGroups
	DupsBy    map[string]int // duplicates per fault (window) that explains them
	OrderLive int            // per-key order violations of first deliveries
	// OrderByNacks are those by an incarnation whose output nacks: a
	// partly written batch, nacked, is written again whole.
	OrderByNacks int
	Regressions  int // checkpoints that moved backwards
	Liveness     int // shards left unread past the bound
	// LivenessBehindPoison are shards left unread past the bound at a
	// poison record their holder could not charge (heldBehindPoison): the
	// documented limit, not a breach.
	LivenessBehindPoison int
	// BudgetWaits are the instances' warnings that a shard waited for the
	// byte budget past budgetWaitBound, or that the budget stalled.
	BudgetWaits int
	// BudgetWaitsOnKinesis are such warnings where the room was mostly
	// reserved for calls Kinesis had not answered: not a breach.
	BudgetWaitsOnKinesis int
	// BudgetWaitsExcused are warned waits whose time outside faults that
	// withheld the instance's deliveries, less the slow output's pace for
	// what was in the pipeline, stayed within the bound: not a breach.
	BudgetWaitsExcused int
	// FenceBreaches are deliveries of a shard while another instance held
	// its lease; FenceJudged how many deliveries were judged.
	FenceBreaches, FenceJudged int
	RSSBreaches                int // instances over their budget plus margin
	PeakRSSMiB                 int
	Leftover                   []int // processes alive after the soak
	// The streams class: incarnations with a delivery after their
	// deletion, records left undelivered when a stream was deleted, shards
	// of a new stream not read within their bound (also in Liveness), and
	// how long after ACTIVE each new stream's shards were first delivered
	// from.
	StaleDeliveries, DeletedUnread, NewStreamLate int
	NewStreamReads                                []time.Duration
	// Strays are the user records of stray aggregates in the streams,
	// which readers drop and the checker leaves out (see addRecord).
	Strays int

	// First is the first invariant broken, FirstAt when; Context the
	// schedule's lines around it.
	First    string
	FirstAt  time.Time
	Context  []string
	Problems []string
}

// Lost counts what was never delivered: stream records, or messages the
// producers sent (the same loss counts in both), whichever are more.
func (v Verdict) Lost() int { return max(v.Table.InputLost, v.Table.EndToEndLost) }

// OrderViolations counts the per-key order violations of first deliveries
// no nack explains, or those of the stream itself (the output's doing),
// whichever are more: a key out of order in the stream is out of order in
// the deliveries too.
func (v Verdict) OrderViolations() int {
	return max(v.OrderLive, v.Table.OutputOrderViolations)
}

// Pass is the verdict.
func (v Verdict) Pass() bool {
	t := v.Table
	return v.Lost() == 0 && t.OutputLost == 0 && t.WindowBreaches == 0 && t.DupsOutsideWindows == 0 &&
		t.UnmarkedDups == 0 && len(t.ACLRefusals) == 0 && v.DupsOutside == 0 && v.OrderViolations() == 0 && v.Regressions == 0 &&
		v.Liveness == 0 && v.BudgetWaits == 0 && v.StaleDeliveries == 0 && v.DeletedUnread == 0 && v.FenceBreaches == 0 && v.RSSBreaches == 0 && len(v.Leftover) == 0 && v.First == ""
}

// Line is the verdict line, the report's last.
func (v Verdict) Line() string {
	verdict := "PASS"
	if !v.Pass() {
		verdict = "FAIL"
	}
	return fmt.Sprintf("soak: seed=%d duration=%v verdict=%s lost=%d duplicates=%d windows=%d window_breaches=%d unmarked_duplicates=%d order_violations=%d regressions=%d liveness=%d peak_rss_mib=%d %s",
		v.Seed, v.Duration, verdict, v.Lost(), v.Table.Duplicates, len(v.Table.Windows), v.Table.WindowBreaches, v.Table.UnmarkedDups, v.OrderViolations(), v.Regressions, v.Liveness, v.PeakRSSMiB, v.excuses())
}

// excuses renders every count the verdict let off, zero or not: a check
// whose excuses are out of sight cannot be told from one that cannot fail.
// They are unmarked duplicates after a wipe no live holder saw (the mark's
// limit) or stamped after a marked copy by an instance paused across both;
// records first delivered after a later one of their key where a nacking
// output delivered one of the two; warned budget waits within the bound
// once faults that withheld deliveries are taken out, or behind calls
// Kinesis did not answer; duplicates explained as behind a poison record;
// duplicates of the acknowledged commits a replica promotion lost with
// min_replicas_to_ack 0 (failoverLagKind).
func (v Verdict) excuses() string {
	behindPoison, failoverLag := 0, 0
	for _, w := range v.Table.Windows {
		switch w.Kind {
		case behindPoisonKind:
			behindPoison += w.Dups
		case failoverLagKind:
			failoverLag += w.Dups
		}
	}
	return fmt.Sprintf("excused_unmarked_after_wipe=%d excused_unmarked_stamped_late=%d excused_order_after_nacks=%d excused_budget_waits=%d excused_budget_waits_on_kinesis=%d excused_dups_behind_poison=%d excused_held_behind_uncharged_poison=%d excused_liveness_behind_uncharged_poison=%d excused_dups_failover_lag=%d",
		v.Table.Marks.Excused, v.Table.Marks.Reordered, max(v.OrderByNacks, v.Table.OrderByNacks), v.BudgetWaitsExcused, v.BudgetWaitsOnKinesis, behindPoison, v.Table.HeldBehindPoison, v.LivenessBehindPoison, failoverLag)
}

// at renders a time as its offset from the soak's start.
func (s *soak) at(t time.Time) string {
	return "t=" + t.Sub(s.start).Round(100*time.Millisecond).String()
}

// contextWindow is how far around the first broken invariant the report
// shows the schedule.
const contextWindow = 30 * time.Second

// report prints the schedule as it ran, the table, what broke first with
// the events around it, and last the verdict line.
func (s *soak) report(v *Verdict) {
	v.Seed, v.Duration = s.sc.Seed, s.sc.Duration
	if v.First == "" {
		// Broken only at the end (lost records, leftovers, the bound).
		switch {
		case v.Lost() > 0:
			v.First = fmt.Sprintf("nothing lost: %d never delivered", v.Lost())
		case v.Table.WindowBreaches > 0:
			v.First = fmt.Sprintf("duplicates: %d fault windows over their own bound", v.Table.WindowBreaches)
			for _, l := range WindowLines(v.Table.Windows, s.at) {
				if strings.Contains(l, " OVER (") {
					v.First += "\n  " + l
				}
			}
		case v.Table.UnmarkedDups > 0:
			v.First = fmt.Sprintf("redelivery mark: %d deliveries of records delivered before without kinesis_redelivered: true", v.Table.UnmarkedDups)
		case len(v.Table.ACLRefusals) > 0:
			v.First = "Redis ACL: the inputs were refused a command"
		case len(v.Leftover) > 0:
			v.First = fmt.Sprintf("no process left: %v still running", v.Leftover)
		case v.Table.OutputOrderViolations > 0:
			v.First = fmt.Sprintf("order: %d records in the stream after a later one of their key (the output's)", v.Table.OutputOrderViolations)
		}
	}
	s.smu.Lock()
	for _, e := range s.events {
		if !v.FirstAt.IsZero() && e.at.Sub(v.FirstAt).Abs() <= contextWindow {
			v.Context = append(v.Context, e.text)
		}
	}
	timeline := append([]string(nil), s.timeline...)
	s.smu.Unlock()
	out := s.sc.Out
	fmt.Fprintf(out, "soak: seed %d, files in %s\nschedule as it ran:\n", s.sc.Seed, s.cfg.Dir)
	for _, l := range timeline {
		fmt.Fprintln(out, "  "+l)
	}
	fmt.Fprint(out, v.Table.String())
	fmt.Fprintf(out, "duplicates per fault window, each against its own bound (each record the window holds once; none for a wipe under live holders):\n")
	fmt.Fprint(out, WindowsTable(v.Table.Windows, s.at))
	for _, l := range WindowLines(v.Table.Windows, s.at) {
		fmt.Fprintln(out, "  "+l)
	}
	if s.on[ClassStreams] {
		lo, hi := newStreamFigures(v.NewStreamReads)
		s.smu.Lock()
		created, deleted := 0, 0
		for _, st := range s.dyn {
			if st.during {
				created++
			}
			if !st.deleted.IsZero() {
				deleted++
			}
		}
		s.smu.Unlock()
		fmt.Fprintf(out, "streams class: %d streams created during the run, %d deleted; %d shards of new streams first delivered from %v to %v after ACTIVE (bound %v), %d late; %d records undelivered at a deletion; %d deleted incarnations delivered from after their deletion\n",
			created, deleted, len(v.NewStreamReads), lo.Round(100*time.Millisecond), hi.Round(100*time.Millisecond), newStreamBound(s.plan.LeasePeriod), v.NewStreamLate, v.DeletedUnread, v.StaleDeliveries)
	}
	if s.on[ClassEFO] {
		s.smu.Lock()
		stalls, stalled := s.emuStalls, s.emuStalled
		s.smu.Unlock()
		fmt.Fprintf(out, "emulator: kinesis-mock's TLS port stalled %d times, %v in all (each held as a fault under way on every stream)\n", stalls, stalled.Round(100*time.Millisecond))
	}
	fmt.Fprintf(out, "stray aggregate copies in the streams (readers drop them; not checked): %d user records\n", v.Strays)
	fmt.Fprintf(out, "checked while running: %d duplicates outside every window, %d order violations (and %d by nacking outputs), %d checkpoint regressions, %d liveness breaches (bound %v), %d budget waits (bound %v; and %d behind calls Kinesis did not answer, %d within the bound once faults that withheld deliveries and a slow output's pace are taken out), %d deliveries while another instance held the lease (of %d judged), %d instances over %d MiB (peak %d MiB), leftover processes %v\n",
		v.DupsOutside, v.OrderLive, v.OrderByNacks, v.Regressions, v.Liveness, livenessBound, v.BudgetWaits, budgetWaitBound, v.BudgetWaitsOnKinesis, v.BudgetWaitsExcused, v.FenceBreaches, v.FenceJudged, v.RSSBreaches, s.budget()>>20+rssMarginMiB, v.PeakRSSMiB, v.Leftover)
	if len(v.outside) > 0 {
		fmt.Fprintf(out, "duplicates outside every window, largest groups: %s\n", describeGroups(v.outside.largest()))
	}
	if !v.Pass() {
		fmt.Fprintf(out, "first invariant broken: %s\n", v.First)
		if len(v.Context) > 0 {
			fmt.Fprintf(out, "events within %v of it:\n", contextWindow)
			for _, l := range v.Context {
				fmt.Fprintln(out, "  "+l)
			}
		}
		for _, p := range v.Problems {
			fmt.Fprintln(out, "  ! "+p)
		}
	}
	fmt.Fprintln(out, v.Line())
}

// reportAborted reports a soak that could not be carried out (the
// emulator or Redis did not start, a fault could not be applied, the run
// was interrupted): the schedule as far as it ran, then a verdict line
// that says so, so a reader of the output never takes silence for a pass.
func (s *soak) reportAborted(err error) {
	s.smu.Lock()
	timeline := append([]string(nil), s.timeline...)
	s.smu.Unlock()
	out := s.sc.Out
	fmt.Fprintf(out, "soak: seed %d, files in %s\nschedule as it ran:\n", s.sc.Seed, s.cfg.Dir)
	for _, l := range timeline {
		fmt.Fprintln(out, "  "+l)
	}
	fmt.Fprintln(out, abortedLine(s.sc.Seed, s.sc.Duration, err))
}

// abortedLine is the verdict line of a soak that could not be carried out.
func abortedLine(seed uint64, d time.Duration, err error) string {
	return fmt.Sprintf("soak: seed=%d duration=%v verdict=FAIL carried_out=false error=%q", seed, d, err.Error())
}

// noteOutside counts d, a delivery again of first that no fault's window
// explains, in its group.
func (v *Verdict) noteOutside(first, d Delivery) {
	if v.outside == nil {
		v.outside = dupGroups{}
	}
	v.outside.add(first, d)
}
