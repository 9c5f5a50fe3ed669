package chaos

import (
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
)

func TestCheck(t *testing.T) {
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	at := func(ms int) time.Time { return t0.Add(time.Duration(ms) * time.Millisecond) }
	stream := []Record{
		{Shard: "s0", Seq: "1", K: "k0", C: 1}, {Shard: "s0", Seq: "2", K: "k0", C: 2}, {Shard: "s0", Seq: "3", K: "k0", C: 3},
		{Shard: "s1", Seq: "1", K: "k1", C: 1}, {Shard: "s1", Seq: "2", K: "k1", C: 2},
		{Shard: "s1", Seq: "3", K: "k1", C: 2}, // the output wrote k1/2 twice
	}
	perKey := map[string]int{"k0": 3, "k1": 2}
	d := func(shard, seq, k string, c int, inst string, ms int) Delivery {
		return Delivery{K: k, C: c, Shard: shard, Seq: seq, Inst: inst, At: at(ms), Redelivered: "false", Attempt: "1"}
	}
	marked := func(dl Delivery) Delivery { dl.Redelivered = "true"; return dl }

	t.Run("clean run with a kill", func(t *testing.T) {
		ds := []Delivery{
			d("s0", "1", "k0", 1, "a1", 0), d("s0", "2", "k0", 2, "a1", 100),
			d("s1", "1", "k1", 1, "b1", 50), d("s1", "2", "k1", 2, "b1", 60), d("s1", "3", "k1", 2, "b1", 70),
			// a1 is killed at 150 after delivering s0/2; b1 reads it again,
			// marked.
			marked(d("s0", "2", "k0", 2, "b1", 3000)), d("s0", "3", "k0", 3, "b1", 3100),
		}
		tab := Check(perKey, stream, ds,
			[]Window{{What: "kill a1", Inst: "a1", From: at(0), To: at(150)}},
			[]Kill{{Inst: "a1", At: at(150), Shards: []string{"s0"}}}, nil)
		assert.True(t, tab.OK(), tab.String())
		assert.Equal(t, 5, tab.Produced)
		assert.Equal(t, 1, tab.OutputDups)
		assert.Equal(t, 6, tab.DeliveredUnique)
		assert.Equal(t, 1, tab.Duplicates)
		assert.Equal(t, []WindowTally{{What: "kill a1", Kind: "kill a1", From: at(0), To: at(150), At: at(0), Bound: 2, Dups: 1}}, tab.Windows)
		assert.Equal(t, 2850*time.Millisecond, tab.MaxFailoverGap)
		assert.Zero(t, tab.UnmarkedDups)
	})

	t.Run("a record never delivered is lost", func(t *testing.T) {
		ds := []Delivery{
			d("s0", "1", "k0", 1, "a1", 0), d("s0", "3", "k0", 3, "a1", 100),
			d("s1", "1", "k1", 1, "b1", 50), d("s1", "2", "k1", 2, "b1", 60), d("s1", "3", "k1", 2, "b1", 70),
		}
		tab := Check(perKey, stream, ds, nil, nil, nil)
		assert.False(t, tab.OK())
		assert.Equal(t, 1, tab.InputLost)
		assert.Equal(t, 1, tab.EndToEndLost)
		assert.Contains(t, tab.String(), "FAIL")
	})

	t.Run("a key delivered out of order", func(t *testing.T) {
		ds := []Delivery{
			d("s0", "2", "k0", 2, "a1", 0), d("s0", "1", "k0", 1, "a1", 10), d("s0", "3", "k0", 3, "a1", 20),
			d("s1", "1", "k1", 1, "b1", 50), d("s1", "2", "k1", 2, "b1", 60), d("s1", "3", "k1", 2, "b1", 70),
		}
		tab := Check(perKey, stream, ds, nil, nil, nil)
		assert.Equal(t, 1, tab.OrderViolations)
		assert.False(t, tab.OK())
	})

	// Guards the paused-holder phase's order excuse (issue 59, item 2): a
	// holder that won back a shard a newcomer read on delivers what lay
	// before after the newcomer's later records; only that is excused.
	t.Run("a holder's shard won back from a newcomer is out of order, not a violation", func(t *testing.T) {
		ds := []Delivery{
			d("s0", "1", "k0", 1, "a1", 0), d("s0", "3", "k0", 3, "n1", 10), d("s0", "2", "k0", 2, "a1", 20),
			d("s1", "1", "k1", 1, "b1", 50), d("s1", "2", "k1", 2, "b1", 60), d("s1", "3", "k1", 2, "b1", 70),
		}
		wonBack := Window{What: "shards won back by a1", Shards: map[string]bool{"s0": true}, From: at(15), To: at(30), Reorders: true}
		tab := Check(perKey, stream, ds, []Window{wonBack}, nil, nil)
		assert.True(t, tab.OK(), tab.String())
		assert.Equal(t, 1, tab.OrderWonBack)
		assert.Empty(t, tab.Windows, "a Reorders window explains no duplicate")
		assert.Contains(t, tab.String(), "won back from a newcomer")
		// Before the holder woke it is a violation.
		late := wonBack
		late.From = at(25)
		tab = Check(perKey, stream, ds, []Window{late}, nil, nil)
		assert.Equal(t, 1, tab.OrderViolations)
		assert.Zero(t, tab.OrderWonBack)
		// So is one after a later record first delivered since it woke.
		early := wonBack
		early.From = at(5)
		tab = Check(perKey, stream, ds, []Window{early}, nil, nil)
		assert.Equal(t, 1, tab.OrderViolations)
		// And one on a shard it did not win back.
		other := wonBack
		other.Shards = map[string]bool{"s1": true}
		tab = Check(perKey, stream, ds, []Window{other}, nil, nil)
		assert.Equal(t, 1, tab.OrderViolations)
	})

	// Guards: the won-back excuse took any later record first delivered
	// before the holder woke, even one the holder itself delivered before
	// it was paused, so a record its own reader skipped and read back
	// after it woke was no order violation.
	t.Run("a record the holder skipped before its pause and read after it woke is a violation", func(t *testing.T) {
		ds := []Delivery{
			d("s0", "1", "k0", 1, "a1", 0), d("s0", "3", "k0", 3, "a1", 2), d("s0", "2", "k0", 2, "a1", 20),
			d("s1", "1", "k1", 1, "b1", 50), d("s1", "2", "k1", 2, "b1", 60), d("s1", "3", "k1", 2, "b1", 70),
		}
		// Paused at 5, woke at 15: nobody but the holder delivered s0.
		wonBack := Window{What: "shards won back by a1", Shards: map[string]bool{"s0": true}, After: at(5), From: at(15), To: at(30), Reorders: true}
		tab := Check(perKey, stream, ds, []Window{wonBack}, nil, nil)
		assert.Equal(t, 1, tab.OrderViolations, tab.String())
		assert.Zero(t, tab.OrderWonBack)
	})

	// Guards the paused-holder phase's flake: the newcomer delivers the
	// batch it fetched from `latest` a few hundred ms after the holder
	// woke (it learns of the holder's re-seed only at its next store
	// call), and the holder's won-back earlier records after it were
	// counted as order violations (a 1-in-3 failure of the phase).
	t.Run("a newcomer's later record delivered just after the holder woke excuses the won-back ones", func(t *testing.T) {
		ds := []Delivery{
			d("s0", "1", "k0", 1, "a1", 0), d("s0", "3", "k0", 3, "n1", 15200), d("s0", "2", "k0", 2, "a1", 18000),
			d("s1", "1", "k1", 1, "b1", 50), d("s1", "2", "k1", 2, "b1", 60), d("s1", "3", "k1", 2, "b1", 70),
		}
		// Paused at 5 s, woken at 15 s; the plan's lease period is 3 s.
		wonBack := wonBackWindow("a1", map[string]bool{"s0": true}, at(5000), at(15000), PlanFor(true))
		tab := Check(perKey, stream, ds, []Window{wonBack}, nil, nil)
		assert.Zero(t, tab.OrderViolations, tab.String())
		assert.Equal(t, 1, tab.OrderWonBack)
		// A later record the newcomer delivered a lease period after the
		// wake is no batch in flight: the order break is a violation.
		ds[1].At = at(18100)
		ds[2].At = at(19000)
		tab = Check(perKey, stream, ds, []Window{wonBack}, nil, nil)
		assert.Equal(t, 1, tab.OrderViolations, tab.String())
		// Nor does the holder excuse itself: its own later record after it
		// woke, then an earlier one, is a violation.
		ds[1].At, ds[1].Inst = at(15200), "a1"
		tab = Check(perKey, stream, ds, []Window{wonBack}, nil, nil)
		assert.Equal(t, 1, tab.OrderViolations, tab.String())
	})

	// Guards: the grace after the wake excused a later record by any
	// instance but the one delivering the earlier record, so the woken
	// holder's own later record, then an earlier one of its key from a
	// won-back shard another instance (the holder's hand-off, a restarted
	// instance) delivered, was no order violation.
	t.Run("the woken holder's later record then another instance's earlier one is a violation", func(t *testing.T) {
		ds := []Delivery{
			d("s0", "1", "k0", 1, "a1", 0), d("s0", "3", "k0", 3, "a1", 15200), d("s0", "2", "k0", 2, "b2", 16000),
			d("s1", "1", "k1", 1, "b1", 50), d("s1", "2", "k1", 2, "b1", 60), d("s1", "3", "k1", 2, "b1", 70),
		}
		// Paused at 5 s, woken at 15 s; the plan's lease period is 3 s.
		wonBack := wonBackWindow("a1", map[string]bool{"s0": true}, at(5000), at(15000), PlanFor(true))
		tab := Check(perKey, stream, ds, []Window{wonBack}, nil, nil)
		assert.Equal(t, 1, tab.OrderViolations, tab.String())
		assert.Zero(t, tab.OrderWonBack)
	})

	t.Run("a duplicate outside every window breaks the bound", func(t *testing.T) {
		ds := []Delivery{
			d("s0", "1", "k0", 1, "a1", 0), d("s0", "2", "k0", 2, "a1", 10), d("s0", "3", "k0", 3, "a1", 20),
			marked(d("s0", "3", "k0", 3, "a1", 30)),
			d("s1", "1", "k1", 1, "b1", 50), d("s1", "2", "k1", 2, "b1", 60), d("s1", "3", "k1", 2, "b1", 70),
		}
		tab := Check(perKey, stream, ds, nil, nil, nil)
		assert.False(t, tab.OK())
		assert.Equal(t, 1, tab.DupsOutsideWindows)
		assert.True(t, strings.Contains(strings.Join(tab.Problems, "\n"), "outside every expected window"))
	})

	t.Run("the output writing a key out of order", func(t *testing.T) {
		swapped := []Record{
			{Shard: "s0", Seq: "1", K: "k0", C: 2}, {Shard: "s0", Seq: "2", K: "k0", C: 1}, {Shard: "s0", Seq: "3", K: "k0", C: 3},
			{Shard: "s1", Seq: "1", K: "k1", C: 1}, {Shard: "s1", Seq: "2", K: "k1", C: 2},
		}
		tab := Check(perKey, swapped, nil, nil, nil, nil)
		assert.Equal(t, 1, tab.OutputOrderViolations)
		assert.False(t, tab.OK())
		assert.Contains(t, tab.String(), "per-key order violations in the stream")
	})

	t.Run("an aggregate written twice is a duplicate, not a swap", func(t *testing.T) {
		// One aggregated record holds k0/1 and k0/2; its request's answer
		// was lost, so the output sent it again (seed 1, 3 min: kpl-k1/199
		// "after" kpl-k1/200, both copies of one aggregate).
		twice := []Record{
			{Shard: "s0", Seq: "1/0", K: "k0", C: 1}, {Shard: "s0", Seq: "1/1", K: "k0", C: 2},
			{Shard: "s0", Seq: "2/0", K: "k0", C: 1}, {Shard: "s0", Seq: "2/1", K: "k0", C: 2},
			{Shard: "s0", Seq: "3", K: "k0", C: 3},
			{Shard: "s1", Seq: "1", K: "k1", C: 1}, {Shard: "s1", Seq: "2", K: "k1", C: 2},
		}
		tab := Check(perKey, twice, nil, nil, nil, nil)
		assert.Zero(t, tab.OutputOrderViolations, tab.Problems)
		assert.Equal(t, 2, tab.OutputDups)
	})

	t.Run("the output losing a message", func(t *testing.T) {
		tab := Check(map[string]int{"k0": 4, "k1": 2}, stream, nil, nil, nil, nil)
		assert.Equal(t, 1, tab.OutputLost)
		assert.False(t, tab.OK())
	})
}

func TestParseDeliveriesSkipsTornLastLine(t *testing.T) {
	in := `{"k":"k0","c":1,"shard":"s0","seq":"1","inst":"a1","at":"2026-01-01T00:00:00Z"}
{"k":"k0","c":2,"shard":"s0","seq":"2","inst":"a1","at":"2026-01-01T00:00:01Z"}
{"k":"k0","c":3,"sha`
	ds, err := parseDeliveries(strings.NewReader(in))
	assert.NoError(t, err)
	assert.Len(t, ds, 2)
}

// A record first delivered before two wipes may come again after each:
// each window that holds its first one allows one more delivery.
func TestCheckBoundCountsEachWindowThatHoldsAFirstDelivery(t *testing.T) {
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	at := func(ms int) time.Time { return t0.Add(time.Duration(ms) * time.Millisecond) }
	stream := []Record{{Shard: "s0", Seq: "1", K: "k0", C: 1}, {Shard: "s0", Seq: "2", K: "k0", C: 2}}
	d := func(seq string, c int, inst string, ms int, again bool) Delivery {
		r := "false"
		if again {
			r = "true"
		}
		return Delivery{K: "k0", C: c, Shard: "s0", Seq: seq, Inst: inst, At: at(ms), Redelivered: r, Attempt: "1"}
	}
	wipe := func(what string, ms int) Window {
		return Window{What: what, Shards: map[string]bool{"s0": true}, From: t0, To: at(ms)}
	}
	ds := []Delivery{
		d("1", 1, "a1", 0, false), d("2", 2, "a1", 10, false),
		d("1", 1, "a1", 1000, true), d("2", 2, "a1", 1010, true), // read again after the first wipe
		d("1", 1, "a1", 2000, true), d("2", 2, "a1", 2010, true), // and after the second
	}
	tab := Check(map[string]int{"k0": 2}, stream, ds, []Window{wipe("redis-empty", 500), wipe("redis-flush", 1500)}, nil, nil)
	assert.Equal(t, 4, tab.Duplicates)
	assert.Equal(t, 2, tab.Windows[0].Bound, "each window holds both first deliveries")
	assert.Equal(t, 2, tab.Windows[1].Dups, "the second wipe explains the third deliveries")
	assert.True(t, tab.OK(), tab.String())

	tab = Check(map[string]int{"k0": 2}, stream, ds, []Window{wipe("redis-empty", 500)}, nil, nil)
	assert.Equal(t, 2, tab.Windows[0].Over, "one window: each first delivery once")
	assert.False(t, tab.OK(), "a third delivery that no second fault explains is over the bound")
}
