package chaos

import (
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
)

// TestCheckRecordsHeldBehindAnUnchargedPoisonRecordAreNotLost guards the
// soak's judgment of the documented limit "A poison record where nothing
// else flows" (soak58 run 5: lost=10): an instance delivered a shard up to
// a poison record that came alone as the producers stopped, and nothing
// else of its input was processed after it, so no failure of it was
// charged; it was sent again, uncharged, until the run ended, and the
// records behind it waited, uncommitted, for the shard's next owner. They
// are held, not lost: counted apart and named on the verdict line. A
// shard that stops at a good record, or whose holder delivered anything
// after the poison record's predecessor, is still lost.
func TestCheckRecordsHeldBehindAnUnchargedPoisonRecordAreNotLost(t *testing.T) {
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	run := func(poisonAt int, laterByHolder bool) Table {
		var stream []Record
		var ds []Delivery
		for c := 1; c <= 6; c++ {
			stream = append(stream, Record{Shard: "s0", Seq: fmt.Sprint(c), K: "k0", C: c, Poison: c == poisonAt})
			if c < 4 {
				ds = append(ds, Delivery{K: "k0", C: c, Shard: "s0", Seq: fmt.Sprint(c), Inst: "c2", At: t0.Add(time.Duration(c) * time.Second), Redelivered: "false", Attempt: "1"})
			}
		}
		stream = append(stream, Record{Shard: "s1", Seq: "1", K: "k1", C: 1})
		at := t0.Add(time.Second)
		if laterByHolder {
			at = t0.Add(time.Minute)
		}
		ds = append(ds, Delivery{K: "k1", C: 1, Shard: "s1", Seq: "1", Inst: "c2", At: at, Redelivered: "false", Attempt: "1"})
		return Check(map[string]int{"k0": 6, "k1": 1}, stream, ds, nil, nil, nil)
	}

	tab := run(4, false)
	assert.Zero(t, tab.InputLost, tab.String())
	assert.Zero(t, tab.EndToEndLost, tab.String())
	assert.Equal(t, 3, tab.HeldBehindPoison, "k0/4 (the poison record) and the two behind it")
	assert.True(t, tab.OK(), tab.String())
	v := Verdict{Table: tab}
	assert.Contains(t, v.Line(), " excused_held_behind_uncharged_poison=3")

	tab = run(5, false)
	assert.Equal(t, 3, tab.InputLost, "the shard stopped at a good record: lost")
	assert.Zero(t, tab.HeldBehindPoison)

	tab = run(4, true)
	assert.Equal(t, 3, tab.InputLost, "its holder processed a record after: the poison record could be charged")
	assert.Zero(t, tab.HeldBehindPoison)
}

// TestLivenessExcusesAShardHeldAtAnUnchargedPoisonRecord guards the
// monitor's side of the same limit (soak58 run 5: liveness=1): a shard
// stuck at a poison record its holder could not charge is counted apart
// and named on the verdict line, not a liveness breach; stuck at a good
// record it still is one.
func TestLivenessExcusesAShardHeldAtAnUnchargedPoisonRecord(t *testing.T) {
	t0 := time.Now()
	const id = "soak-a/shardId-000000000000"
	for _, poison := range []bool{true, false} {
		t.Run(fmt.Sprint("poison=", poison), func(t *testing.T) {
			s, m := streamsSoak(t0)
			s.active, s.quiet = map[string]int{}, map[string]time.Time{"": t0}
			ss := shadowOf(m, id, 5, t0)
			ss.recs[3].Poison = poison
			for i := range 3 {
				m.pending = append(m.pending, deliveryOf(ss, i, "c2", t0.Add(time.Duration(i)*100*time.Millisecond)))
			}
			now := t0.Add(livenessBound + holdBack + time.Minute)
			m.deliveries(now, false)
			m.liveness(now)
			if poison {
				assert.Zero(t, m.v.Liveness)
				assert.Equal(t, 1, m.v.LivenessBehindPoison)
				assert.Contains(t, m.v.Line(), " excused_liveness_behind_uncharged_poison=1")
				return
			}
			assert.Equal(t, 1, m.v.Liveness)
			assert.Zero(t, m.v.LivenessBehindPoison)
		})
	}
}
