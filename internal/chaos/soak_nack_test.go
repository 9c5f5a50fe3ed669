package chaos

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestSoakDuplicateBehindAPoisonRecordIsExplained: a marked duplicate
// outside every window is judged at the end: explained when a record of
// its shard at or before it was dead-lettered after its first delivery
// (it waited behind the poison record's attempts and a hand-off came
// first), not when the dead-lettered record comes after it, is of another
// shard, or was dead-lettered before the first delivery.
func TestSoakDuplicateBehindAPoisonRecordIsExplained(t *testing.T) {
	t0 := time.Now()
	const shard = "soak-kpl/shardId-000000000000"
	for _, tc := range []struct {
		name    string
		dead    Delivery
		outside int
	}{
		{"an earlier sub-record dead-lettered later", Delivery{Inst: "c4", Shard: shard, Seq: "4968/1", At: t0.Add(3 * time.Second), DeadLetterReason: "max_attempts"}, 0},
		{"an earlier record dead-lettered later", Delivery{Inst: "c4", Shard: shard, Seq: "4967", At: t0.Add(3 * time.Second), DeadLetterReason: "max_attempts"}, 0},
		{"a later record", Delivery{Inst: "c4", Shard: shard, Seq: "4969", At: t0.Add(3 * time.Second), DeadLetterReason: "max_attempts"}, 1},
		{"another shard", Delivery{Inst: "c4", Shard: "soak-kpl/shardId-000000000001", Seq: "4968/1", At: t0.Add(3 * time.Second), DeadLetterReason: "max_attempts"}, 1},
		{"dead-lettered before the first delivery", Delivery{Inst: "a1", Shard: shard, Seq: "4968/1", At: t0.Add(-time.Second), DeadLetterReason: "max_attempts"}, 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := &soak{runner: &runner{logf: func(string, ...any) {}}, nackers: map[string]bool{}}
			m := newMonitor(s)
			first := Delivery{Inst: "a1", Shard: shard, Seq: "4968/3", K: "kpl-k5", C: 668, At: t0}
			again := first
			again.Inst, again.At, again.Redelivered = "c4", t0.Add(time.Second), "true"
			m.pending = []Delivery{first, again, tc.dead}
			m.deliveries(t0.Add(time.Hour), true)
			assert.Equal(t, tc.outside, m.v.DupsOutside)
			// The end's table judges the same duplicate alike.
			table := Check(nil, nil, m.all, m.explained, nil, nil)
			assert.Equal(t, tc.outside, table.DupsOutsideWindows, "the table's duplicates outside every window")
			if tc.outside == 0 {
				assert.Equal(t, 1, m.v.DupsBy["behind a poison record"])
				assert.Empty(t, m.v.First)
			}
		})
	}
}

// TestSoakMarkedDuplicateInAPauseKnownLaterIsExplained: a pause's window
// is added when the pause ends; a marked duplicate judged while the pause
// went on is judged again at the end, inside it.
func TestSoakMarkedDuplicateInAPauseKnownLaterIsExplained(t *testing.T) {
	t0 := time.Now()
	s := &soak{runner: &runner{logf: func(string, ...any) {}}, nackers: map[string]bool{}}
	m := newMonitor(s)
	first := Delivery{Inst: "b1", Shard: "soak-a/shardId-000000000002", Seq: "4968", K: "a-k4", C: 290, At: t0}
	again := first
	again.Inst, again.At, again.Redelivered = "a1", t0.Add(2*time.Second), "true"
	m.pending = []Delivery{first, again}
	m.deliveries(t0.Add(time.Hour), false)
	assert.Zero(t, m.v.DupsOutside, "not judged while the pause may go on")
	s.windows = append(s.windows, Window{What: "pause b1", From: t0.Add(-time.Second), To: t0.Add(10 * time.Second)})
	m.deliveries(t0.Add(time.Hour), true)
	assert.Zero(t, m.v.DupsOutside)
	assert.Equal(t, 1, m.v.DupsBy["pause b1"])
}

// Duplicates outside every window are grouped in the report by shard and
// by who delivered them first and again, as the unmarked ones are: the
// report shows ten examples, which a long run's first group fills.
func TestSoakGroupsDuplicatesOutsideEveryWindow(t *testing.T) {
	t0 := time.Now()
	s := &soak{runner: &runner{logf: func(string, ...any) {}}, nackers: map[string]bool{}}
	m := newMonitor(s)
	for c := 1; c <= 3; c++ {
		first := Delivery{Inst: "a5", Shard: "soak-kpl/shardId-000000000006", Seq: fmt.Sprint(c), K: "kpl-k0", C: c, At: t0.Add(time.Duration(c) * time.Millisecond)}
		again := first
		again.Inst, again.At = "b8", t0.Add(time.Minute)
		m.pending = append(m.pending, first, again)
	}
	first := Delivery{Inst: "a5", Shard: "soak-a/shardId-000000000000", Seq: "9", K: "a-k0", C: 9, At: t0}
	again := first
	again.Inst, again.At = "c6", t0.Add(time.Minute)
	m.pending = append(m.pending, first, again)
	m.deliveries(t0.Add(time.Hour), true)
	assert.Equal(t, 4, m.v.DupsOutside)
	got := describeGroups(m.v.outside.largest())
	assert.True(t, strings.HasPrefix(got, "3 of soak-kpl/shardId-000000000006 by a5 then b8 (first: kpl-k0/1 at "), got)
	assert.Contains(t, got, "; 1 of soak-a/shardId-000000000000 by a5 then c6")
}

// A key's record first delivered after a later one of it is the nacking
// output's doing when either was delivered by an instance whose output
// nacks: it wrote the later record in a batch it then failed, and the
// earlier one came after it from the next owner. Between two instances
// that do not nack it is a violation.
func TestSoakOrderViolationAfterANackersDeliveryIsTheNacks(t *testing.T) {
	t0 := time.Now()
	const shard = "soak-kpl/shardId-000000000015"
	for _, tc := range []struct {
		name          string
		nackers       map[string]bool
		live, byNacks int
	}{
		{"the later record by a nacker", map[string]bool{"a14": true}, 0, 1},
		{"the earlier record by a nacker", map[string]bool{"b16": true}, 0, 1},
		{"neither nacks", map[string]bool{}, 1, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := &soak{runner: &runner{logf: func(string, ...any) {}}, nackers: tc.nackers}
			m := newMonitor(s)
			later := Delivery{Inst: "a14", Shard: shard, Seq: "3931", K: "kpl-k0", C: 3931, At: t0}
			earlier := Delivery{Inst: "b16", Shard: shard, Seq: "3929", K: "kpl-k0", C: 3929, At: t0.Add(time.Second), Redelivered: "true"}
			m.pending = []Delivery{later, earlier}
			m.deliveries(t0.Add(time.Hour), true)
			assert.Equal(t, tc.live, m.v.OrderLive, "violations")
			assert.Equal(t, tc.byNacks, m.v.OrderByNacks, "by nacking outputs")
			// The end's table judges them alike.
			table := Check(nil, nil, m.all, nil, nil, tc.nackers)
			assert.Equal(t, tc.live, table.OrderViolations, "the table's violations")
			assert.Equal(t, tc.byNacks, table.OrderByNacks, "the table's by nacking outputs")
			assert.Equal(t, tc.live == 0, table.OK(), table.String())
		})
	}
}

// The soak's report has one verdict, the last line's: the table it prints
// names no verdict of its own and lists no order problem the nacks
// explain (seed 6, 45 min, printed "verdict FAIL" and ten "! order:" lines
// in the table above "verdict=PASS").
func TestSoakReportHasOneVerdict(t *testing.T) {
	t0 := time.Now()
	s, m := streamsSoak(t0)
	s.nackers["a2"] = true
	var out strings.Builder
	s.sc.Out = &out
	later := Delivery{Inst: "a2", Shard: "soak-a/shardId-000000000002", Seq: "254", K: "a-k4", C: 254, At: t0}
	earlier := Delivery{Inst: "a2", Shard: "soak-a/shardId-000000000002", Seq: "252", K: "a-k4", C: 252, At: t0.Add(time.Second)}
	m.pending = []Delivery{later, earlier}
	m.deliveries(t0.Add(time.Hour), true)
	v := m.v
	v.Table = Check(nil, []Record{{Shard: later.Shard, Seq: "252", K: "a-k4", C: 252}, {Shard: later.Shard, Seq: "254", K: "a-k4", C: 254}},
		m.all, nil, nil, s.nackers)
	v.Table.NoVerdict = true
	s.report(&v)
	got := out.String()
	require.True(t, v.Pass(), got)
	assert.Equal(t, 1, strings.Count(got, "verdict"), got)
	assert.True(t, strings.HasSuffix(got, "verdict=PASS lost=0 duplicates=0 windows=0 window_breaches=0 unmarked_duplicates=0 order_violations=0 regressions=0 liveness=0 peak_rss_mib=0 excused_unmarked_after_wipe=0 excused_unmarked_stamped_late=0 excused_order_after_nacks=1 excused_budget_waits=0 excused_budget_waits_on_kinesis=0 excused_dups_behind_poison=0 excused_held_behind_uncharged_poison=0 excused_liveness_behind_uncharged_poison=0 excused_dups_failover_lag=0\n"), got)
	assert.NotContains(t, got, "! order")
	assert.Contains(t, got, "per-key order violations                            0 (and 1 after a nacking output's delivery: not violations)")
}

// With the efo class the table's input line says how many incarnations
// read past the fault proxy: its faults did not reach them.
func TestSoakTableNamesTheFanOutReaders(t *testing.T) {
	got := Table{FanOut: 2, Incarnations: 5}.String()
	assert.Contains(t, got, "input (stream -> fault proxy -> 3 kinesis input processes; 2 of 5 incarnations read with enhanced fan-out, past the proxy)")
	assert.Contains(t, Table{}.String(), "input (stream -> fault proxy -> 3 kinesis input processes)\n")
}

// TestSoakDuplicateBehindAPoisonRecordKeepsAFaultWindowsAllowance: a record
// delivered beside a poison record that is still taking its attempts comes
// again from a hand-off, and once more when a fault whose window also holds
// its first delivery strikes (a promotion that lost the next owner's
// commit and lease). The first duplicate is the poison record's, the
// second the fault's: the fault's window is not over its bound
// (failover-sentinel-unacked soak, seed 5, CI 2026-12-07: c1 handed
// soak-a/shardId-000000000001 over with a1's poison record a-k2/134 still
// failing, a1 delivered a-k3/134 again, and the promotion's lost lease had
// a1 deliver it a third time, "1 OVER").
func TestSoakDuplicateBehindAPoisonRecordKeepsAFaultWindowsAllowance(t *testing.T) {
	t0 := time.Now()
	const shard = "soak-a/shardId-000000000001"
	s := &soak{runner: &runner{logf: func(string, ...any) {}}, nackers: map[string]bool{}}
	// The replication hold began just after the first delivery; the
	// master died after the hand-off.
	promotion := failoverWindows(ClassFailoverSentinelUnacked, 0, soakPlan, t0.Add(-time.Minute), t0.Add(100*time.Millisecond), t0.Add(time.Second), t0.Add(2*time.Second), nil, nil)[0]
	s.windows = []Window{promotion}
	m := newMonitor(s)
	first := Delivery{Inst: "c1", Shard: shard, Seq: "4968", K: "a-k3", C: 134, At: t0}
	handOff := first
	handOff.Inst, handOff.At, handOff.Redelivered = "a1", t0.Add(500*time.Millisecond), "true"
	afterPromotion := handOff
	afterPromotion.At = t0.Add(6 * time.Second)
	dead := Delivery{Inst: "a1", Shard: shard, Seq: "4967", K: "a-k2", C: 134, At: t0.Add(6 * time.Second), DeadLetterReason: "max_attempts"}
	m.pending = []Delivery{first, handOff, dead, afterPromotion}
	m.deliveries(t0.Add(time.Hour), true)
	assert.Zero(t, m.v.DupsOutside)
	table := Check(nil, nil, m.all, append(append([]Window(nil), s.windows...), m.explained...), nil, nil)
	assert.Zero(t, table.WindowBreaches, "the promotion's window is over its bound: %+v", table.Windows)
	assert.Zero(t, table.DupsOutsideWindows)

	// Without the poison record, the same two duplicates are one over the
	// promotion's bound: the allowance is the poison record's, not a
	// blanket one.
	s2 := &soak{runner: &runner{logf: func(string, ...any) {}}, nackers: map[string]bool{}}
	s2.windows = []Window{promotion}
	m2 := newMonitor(s2)
	m2.pending = []Delivery{first, handOff, afterPromotion}
	m2.deliveries(t0.Add(time.Hour), true)
	table2 := Check(nil, nil, m2.all, append(append([]Window(nil), s2.windows...), m2.explained...), nil, nil)
	assert.Equal(t, 1, table2.WindowBreaches)
}

// TestSoakPoisonRecordDeadLetteredAgainAfterAWipeHoldsNothingBack guards the
// poison record's own window reaching records it never held back: a poison
// record dead-lettered early, then read and dead-lettered again after a
// wipe under no live holder (trim_horizon reads the shard from its start),
// made every record of its shard past it, first delivered between the two
// dead letters, "behind" it. Each got a second allowance on top of the
// wipe's, and a record delivered three times (the wipe's re-read, then a
// second owner: a fencing defect) was not over any bound.
func TestSoakPoisonRecordDeadLetteredAgainAfterAWipeHoldsNothingBack(t *testing.T) {
	t0 := time.Now()
	const shard = "soak-a/shardId-000000000000"
	s := &soak{runner: &runner{logf: func(string, ...any) {}}, nackers: map[string]bool{}}
	began := t0.Add(30 * time.Minute)
	wipe := Window{What: "redis-flush, no live holder", Kind: "redis-flush, no live holder", Shards: map[string]bool{shard: true},
		From: t0.Add(-time.Minute), To: began.Add(time.Minute), Unmarked: true, After: began}
	s.windows = []Window{wipe}
	m := newMonitor(s)
	poison := Delivery{Inst: "c1", Shard: shard, Seq: "100", K: "a-k1", C: 1, Poison: true, Handover: true, MaxAttempts: 3, Attempt: "1", At: t0}
	dead := poison
	dead.Handover, dead.DeadLetterReason, dead.Attempt, dead.At = false, "max_attempts", "3", t0.Add(5*time.Second)
	// Delivered a minute after the poison record was given up: nothing
	// held it back.
	first := Delivery{Inst: "c1", Shard: shard, Seq: "200", K: "a-k2", C: 1, Attempt: "1", At: t0.Add(time.Minute)}
	// The wipe: a1 reads the shard again from its start, the poison
	// record among it, unmarked (the mark's limit), and gives the poison
	// record up again.
	poisonAgain := poison
	poisonAgain.Inst, poisonAgain.At = "a1", began.Add(time.Second)
	reread := first
	reread.Inst, reread.At = "a1", began.Add(time.Second)
	deadAgain := dead
	deadAgain.Inst, deadAgain.At = "a1", began.Add(10*time.Second)
	// A third delivery, by another instance: the wipe allows one.
	third := first
	third.Inst, third.Redelivered, third.At = "b1", "true", began.Add(20*time.Second)
	m.pending = []Delivery{poison, dead, first, poisonAgain, reread, deadAgain, third}
	m.deliveries(t0.Add(time.Hour), true)
	table := Check(nil, nil, append(append([]Delivery(nil), m.all...), m.handovers...), append(append([]Window(nil), s.windows...), m.explained...), nil, nil)
	assert.Equal(t, 1, table.WindowBreaches, "the third delivery hid behind a poison record given up before the record was first delivered: %+v", table.Windows)
}
