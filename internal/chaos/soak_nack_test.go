package chaos

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
)

// TestSoakDuplicateAfterANackingOutputIsExplained: a record an instance
// whose output nacks some messages delivered, delivered again (marked) by
// the shard's next owner outside every fault's window, is explained by
// the nacks: the record waited behind a failed one of its batch. The same
// duplicate without the mark, or after an instance whose output does not
// nack, is not.
func TestSoakDuplicateAfterANackingOutputIsExplained(t *testing.T) {
	t0 := time.Now()
	for _, tc := range []struct {
		name    string
		nacker  bool
		marked  string
		outside int
	}{
		{"a nacking first instance, marked", true, "true", 0},
		{"a nacking first instance, unmarked", true, "", 1},
		{"a first instance that does not nack", false, "true", 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := &soak{runner: &runner{logf: func(string, ...any) {}}, nackers: map[string]bool{}}
			if tc.nacker {
				s.nackers["a1"] = true
			}
			m := newMonitor(s)
			first := Delivery{Inst: "a1", Shard: "soak-kpl/shardId-000000000000", Seq: "4968/3", K: "kpl-k5", C: 668, At: t0}
			again := first
			again.Inst, again.At, again.Redelivered = "c4", t0.Add(time.Second), tc.marked
			m.pending = []Delivery{first, again}
			m.deliveries(t0.Add(time.Hour), true)
			assert.Equal(t, tc.outside, m.v.DupsOutside)
			if tc.outside == 0 {
				assert.Equal(t, 1, m.v.DupsBy["nacks by a1's output"])
			}
		})
	}
}

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
			if tc.outside == 0 {
				assert.Equal(t, 1, m.v.DupsBy["behind a poison record"])
				assert.Empty(t, m.v.First)
			}
		})
	}
}
