package chaos

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
)

// TestSoakKillOfAPoisonRecordsHolderAllowsOneDuplicate: a kill of the
// instance holding a shard while its poison record waits for its attempts
// has the next owner deliver the records beside it again, once: the kill
// is the only hand-off. A second duplicate is over the kill's bound, the
// poison record's window notwithstanding.
func TestSoakKillOfAPoisonRecordsHolderAllowsOneDuplicate(t *testing.T) {
	t0 := time.Now()
	const shard = "soak-a/shardId-000000000001"
	s := &soak{runner: &runner{logf: func(string, ...any) {}}, nackers: map[string]bool{}}
	kill := Window{What: "kill c1", Kind: "kill", Inst: "c1", Shards: map[string]bool{shard: true}, From: t0.Add(-time.Minute), To: t0.Add(2 * time.Second), At: t0.Add(time.Second)}
	s.windows = []Window{kill}
	m := newMonitor(s)
	poison := Delivery{Inst: "c1", Shard: shard, Seq: "4967", K: "a-k2", C: 134, Poison: true, Handover: true, MaxAttempts: 3, Attempt: "1", At: t0}
	first := Delivery{Inst: "c1", Shard: shard, Seq: "4968", K: "a-k3", C: 134, Attempt: "1", At: t0}
	again := first
	again.Inst, again.Redelivered, again.At = "a1", "true", t0.Add(3*time.Second)
	poisonAgain := poison
	poisonAgain.Inst, poisonAgain.At = "a1", t0.Add(3*time.Second)
	dead := poisonAgain
	dead.Handover, dead.DeadLetterReason, dead.Attempt, dead.At = false, "max_attempts", "3", t0.Add(8*time.Second)
	third := again
	third.At = t0.Add(9 * time.Second)
	m.pending = []Delivery{poison, first, poisonAgain, again, dead, third}
	m.deliveries(t0.Add(time.Hour), true)
	table := Check(nil, nil, append(append([]Delivery(nil), m.all...), m.handovers...), append(append([]Window(nil), s.windows...), m.explained...), nil, nil)
	assert.Equal(t, 1, table.WindowBreaches, "a third delivery after one kill is hidden by the poison record's window: %+v", table.Windows)
}
