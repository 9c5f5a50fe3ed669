package chaos

import (
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/connect-kinesis/connect-kinesis/internal/consumer"
)

// windowsRun is a synthetic event log: key k0's records 1..4 on shard s0,
// first delivered by a1, and key k1's records 1..4 on shard s1, first
// delivered by b1, whose output nacks (a window over the whole run).
func windowsRun(t0 time.Time) (map[string]int, []Record, []Delivery) {
	var stream []Record
	var ds []Delivery
	for c := 1; c <= 4; c++ {
		for _, x := range []struct{ shard, k, inst string }{{"s0", "k0", "a1"}, {"s1", "k1", "b1"}} {
			seq := fmt.Sprint(c)
			stream = append(stream, Record{Shard: x.shard, Seq: seq, K: x.k, C: c})
			ds = append(ds, Delivery{K: x.k, C: c, Shard: x.shard, Seq: seq, Inst: x.inst, At: t0.Add(time.Duration(c) * time.Millisecond), Redelivered: "false", Attempt: "1"})
		}
	}
	return map[string]int{"k0": 4, "k1": 4}, stream, ds
}

// again is d delivered again by inst at at, marked.
func again(d Delivery, inst string, at time.Time) Delivery {
	d.Inst, d.At, d.Redelivered, d.Attempt = inst, at, "true", "2"
	return d
}

// TestCheckAWindowOverItsOwnBoundFails guards the run-wide duplicate
// bound that could not fail: a kill's window holds one record of a1, which
// comes back three times, while the nacking output's window, over the
// whole run, holds four records that never came again; summed, 3
// duplicates stayed under a bound of 5, and the table passed.
func TestCheckAWindowOverItsOwnBoundFails(t *testing.T) {
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	perKey, stream, ds := windowsRun(t0)
	kill := Window{What: "kill a1", Inst: "a1", Shards: map[string]bool{"s0": true}, From: t0, To: t0.Add(time.Millisecond)}
	nacks := Window{What: "nacks of b1", Inst: "b1", From: t0, To: t0.Add(time.Hour)}
	for i := range 3 {
		ds = append(ds, again(ds[0], "c1", t0.Add(time.Duration(i+1)*time.Second)))
	}
	tab := Check(perKey, stream, ds, []Window{kill, nacks}, nil, nil)
	assert.Equal(t, 3, tab.Duplicates)
	assert.Zero(t, tab.DupsOutsideWindows, "every duplicate's first delivery is in the kill's window")
	assert.False(t, tab.OK(), "the kill's window allows its one record once, not three times: %s", tab.String())
	// The breach names its records, so a failed run nobody watched (CI)
	// can be read back from its verdict.
	lines := WindowLines(tab.Windows, func(at time.Time) string { return at.Sub(t0).String() })
	require.Len(t, lines, 1)
	assert.Contains(t, lines[0], "kill a1: 3 duplicates, bound 1, 2 OVER (s0 1 first by a1 at 00:00:00.001, again by c1 at 00:00:02.000; s0 1 first by a1 at 00:00:00.001, again by c1 at 00:00:03.000)")
}

// TestCheckWindowsJudgeEachDuplicateAgainstItsOwnWindow guards the
// per-window bound itself: a correct run passes with each window's
// duplicates within its bound; a FLUSHALL under a live holder allows none;
// a duplicate that a kill's window also holds is the kill's.
func TestCheckWindowsJudgeEachDuplicateAgainstItsOwnWindow(t *testing.T) {
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	kill := Window{What: "kill a1", Kind: "kill", Inst: "a1", From: t0, To: t0.Add(2 * time.Millisecond)}
	flush := Window{What: "redis-flush", Kind: "redis-flush", NoDups: true, From: t0, To: t0.Add(time.Hour)}

	t.Run("a correct run passes", func(t *testing.T) {
		perKey, stream, ds := windowsRun(t0)
		// a1 delivered k0/1 and k0/2 since its last commit: both come again
		// once, from c1.
		ds = append(ds, again(ds[0], "c1", t0.Add(time.Second)), again(ds[2], "c1", t0.Add(time.Second)))
		tab := Check(perKey, stream, ds, []Window{kill, flush}, nil, nil)
		require.True(t, tab.OK(), tab.String())
		v := Verdict{Table: tab}
		assert.True(t, v.Pass(), v.Line())
		require.Len(t, tab.Windows, 2)
		assert.Equal(t, WindowTally{What: "kill a1", Kind: "kill", From: kill.From, To: kill.To, At: kill.From, Bound: 2, Dups: 2}, tab.Windows[0])
		assert.Equal(t, WindowTally{What: "redis-flush", Kind: "redis-flush", From: flush.From, To: flush.To, At: flush.From}, tab.Windows[1], "the kill explains them, not the flush")
	})

	t.Run("a duplicate under a flush with a live holder fails", func(t *testing.T) {
		perKey, stream, ds := windowsRun(t0)
		// b1 held s1, live, at the FLUSHALL; its k1/3 came again anyway.
		ds = append(ds, again(ds[5], "c1", t0.Add(time.Second)))
		tab := Check(perKey, stream, ds, []Window{kill, flush}, nil, nil)
		assert.False(t, tab.OK(), tab.String())
		assert.Equal(t, 1, tab.WindowBreaches)
		assert.Equal(t, 1, tab.Windows[1].Over)
		v := Verdict{Table: tab}
		assert.False(t, v.Pass())
		assert.Contains(t, v.Line(), "window_breaches=1")
	})

	t.Run("a record twice in one window is over its bound", func(t *testing.T) {
		perKey, stream, ds := windowsRun(t0)
		ds = append(ds, again(ds[0], "c1", t0.Add(time.Second)), again(ds[0], "c2", t0.Add(2*time.Second)))
		tab := Check(perKey, stream, ds, []Window{kill, flush}, nil, nil)
		assert.Equal(t, 1, tab.WindowBreaches, tab.String())
		assert.Equal(t, WindowTally{What: "kill a1", Kind: "kill", From: kill.From, To: kill.To, At: kill.From, Bound: 2, Dups: 2, Over: 1,
			OverSample: []string{"s0 1 first by a1 at 00:00:00.001, again by c2 at 00:00:02.000"}}, tab.Windows[0])
	})

	t.Run("two wipes each allow the record once", func(t *testing.T) {
		perKey, stream, ds := windowsRun(t0)
		wipe := func(what string) Window {
			return Window{What: what, Kind: "redis-flush, no live holder", Shards: map[string]bool{"s0": true}, From: t0, To: t0.Add(time.Minute)}
		}
		ds = append(ds, again(ds[0], "c1", t0.Add(time.Second)), again(ds[0], "c2", t0.Add(2*time.Second)))
		tab := Check(perKey, stream, ds, []Window{wipe("first"), wipe("second")}, nil, nil)
		assert.Zero(t, tab.WindowBreaches, tab.String())
		table := WindowsTable(tab.Windows, func(t time.Time) string { return "t=0s" })
		assert.Contains(t, table, "redis-flush, no live holder  2        2           1/4 (first at t=0s)")
	})
}

// TestCheckWindowsExplainADuplicateByTheNarrowestWindow guards the
// attribution: a duplicate of a record that a nacking output's window
// (the whole run) and a kill's window both hold is the kill's, so the
// per-kind table says which faults made the duplicates.
func TestCheckWindowsExplainADuplicateByTheNarrowestWindow(t *testing.T) {
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	perKey, stream, ds := windowsRun(t0)
	nacks := Window{What: "nacks of a1", Kind: "nacks", Inst: "a1", From: t0, To: t0.Add(time.Hour)}
	kill := Window{What: "kill a1", Kind: "kill", Inst: "a1", From: t0, To: t0.Add(2 * time.Millisecond)}
	ds = append(ds, again(ds[0], "c1", t0.Add(time.Second)))
	tab := Check(perKey, stream, ds, []Window{nacks, kill}, nil, nil)
	assert.Zero(t, tab.Windows[0].Dups, "not the nacking output's")
	assert.Equal(t, 1, tab.Windows[1].Dups, "the kill's")
}

// TestSoakKillWindowHoldsWhatWasDeliveredSinceTheLastCommit guards the
// kill's bound: with the checkpoints read before the kill, the window
// holds the killed instance's deliveries of its shards past their
// checkpoint (and all of a shard never committed), so a record at or
// before the checkpoint read again is outside every window; without them
// it falls back to the time before the kill.
func TestSoakKillWindowHoldsWhatWasDeliveredSinceTheLastCommit(t *testing.T) {
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	p := soakPlan
	kill := t0.Add(time.Minute)
	perKey, stream, ds := windowsRun(t0)
	since := map[string]consumer.Position{"s0": {Sequence: "2"}}
	w := killedWindow(p, t0, kill, "a1", []string{"s0", "s9"}, since, true)
	assert.False(t, w.Holds(ds[2]), "k0/2 is at the checkpoint")
	assert.True(t, w.Holds(ds[4]), "k0/3 is past it")
	assert.False(t, w.Holds(ds[5]), "s1 is not a1's")
	assert.True(t, w.Holds(Delivery{Shard: "s9", Seq: "1", Inst: "a1", At: t0}), "a shard never committed is held whole")

	ds = append(ds, again(ds[4], "c1", kill.Add(time.Second)), again(ds[6], "c1", kill.Add(time.Second)))
	tab := Check(perKey, stream, ds, []Window{w}, nil, nil)
	assert.True(t, tab.OK(), tab.String())
	assert.Equal(t, 2, tab.Windows[0].Bound, "k0/3 and k0/4, delivered since the commit")
	assert.Equal(t, kill, tab.Windows[0].At, "reported at the kill, not at the start its window reaches back to")

	ds = append(ds, again(ds[2], "c1", kill.Add(time.Second)))
	tab = Check(perKey, stream, ds, []Window{w}, nil, nil)
	assert.Equal(t, 1, tab.DupsOutsideWindows, "k0/2 was committed: read again, it is no kill's doing")

	fallback := killedWindow(p, t0, kill, "a1", []string{"s0"}, nil, false)
	assert.Equal(t, Window{What: "kill a1", Kind: "kill", Inst: "a1", From: kill.Add(-killWindow(p)), To: kill}, fallback)
}

// TestCheckAFlushUnderALiveNackingHolderAllowsNoReadAgain guards the
// nacking output's window, which lasts the whole run and holds every first
// delivery of its instance: a duplicate a FLUSHALL under a live holder
// made (the holder read its shard again from the start, every record once,
// a fresh read: attempt 1) found room there and the verdict passed. A
// nacked batch is sent again by the same reader, counted as a further
// attempt; only such a duplicate is the nacks' doing.
func TestCheckAFlushUnderALiveNackingHolderAllowsNoReadAgain(t *testing.T) {
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	nacks := Window{What: "nacks of b1", Kind: "nacks", Inst: "b1", Resent: true, From: t0, To: t0.Add(time.Hour)}
	flush := Window{What: "redis-flush", Kind: "redis-flush", NoDups: true, From: t0, To: t0.Add(time.Minute)}

	t.Run("the live holder reads its shard again after the flush", func(t *testing.T) {
		perKey, stream, ds := windowsRun(t0)
		for _, i := range []int{1, 3, 5, 7} { // s1's records, b1's
			d := again(ds[i], "b1", t0.Add(time.Second))
			d.Attempt = "1"
			ds = append(ds, d)
		}
		tab := Check(perKey, stream, ds, []Window{nacks, flush}, nil, nil)
		assert.False(t, tab.OK(), "a wipe under a live holder allows no duplicate: %s", tab.String())
	})

	t.Run("a nacked batch sent again by its reader is the nacks' doing", func(t *testing.T) {
		perKey, stream, ds := windowsRun(t0)
		ds = append(ds, again(ds[1], "b1", t0.Add(time.Second)))
		tab := Check(perKey, stream, ds, []Window{nacks, flush}, nil, nil)
		assert.True(t, tab.OK(), tab.String())
		assert.Equal(t, 1, tab.Windows[0].Dups)
	})
}

// TestSoakPauseWindowHoldsOnlyThePausedInstancesShards guards the pause
// and Redis-cut windows, which held every first delivery of every
// instance from a lease before the fault to a lease after it: a live
// instance that was neither paused nor cut off delivering its own shard's
// records twice meanwhile found room there and the verdict passed. A pause
// (or a cut) reads again only the shards the instance held.
func TestSoakPauseWindowHoldsOnlyThePausedInstancesShards(t *testing.T) {
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	for _, kind := range []string{"pause", "redis-cut"} {
		t.Run(kind, func(t *testing.T) {
			perKey, stream, ds := windowsRun(t0)
			w := faultWindow(soakPlan, kind+" a1", kind, t0.Add(time.Millisecond), t0.Add(10*time.Second), []string{"s0"})
			// a1 was paused holding s0: its k0/3 comes again from c1.
			ds = append(ds, again(ds[4], "c1", t0.Add(5*time.Second)))
			tab := Check(perKey, stream, ds, []Window{w}, nil, nil)
			require.True(t, tab.OK(), tab.String())

			// b1, live and never paused, delivers its s1's k1/3 twice.
			ds = append(ds, again(ds[5], "b1", t0.Add(5*time.Second)))
			tab = Check(perKey, stream, ds, []Window{w}, nil, nil)
			assert.False(t, tab.OK(), "a shard the paused instance did not hold is read again by nobody: %s", tab.String())
		})
	}
}
