package chaos

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
)

// A hand-off while a poison record waits for its attempts has the next
// owner deliver again, marked, the records delivered beside it: the
// chaos suite's check explains those duplicates by the record's dead
// letter (poisonWindows), as the soak's does, and no others.
func TestPoisonWindowsExplainRecordsHeldBehindAPoisonRecord(t *testing.T) {
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	at := func(ms int) time.Time { return t0.Add(time.Duration(ms) * time.Millisecond) }
	stream := []Record{
		{Shard: "s0", Seq: "1", K: "k0", C: 1}, {Shard: "s0", Seq: "2", K: "k1", C: 1, Poison: true}, {Shard: "s0", Seq: "3", K: "k0", C: 2},
	}
	perKey := map[string]int{"k0": 2, "k1": 1}
	d := func(seq, k string, c int, inst string, ms int) Delivery {
		return Delivery{K: k, C: c, Shard: "s0", Seq: seq, Inst: inst, At: at(ms), Attempt: "1"}
	}
	marked := func(dl Delivery) Delivery { dl.Redelivered = "true"; return dl }
	poison := func(dl Delivery) Delivery { dl.Poison = true; return dl }
	deliveries := func(deadAt int) []Delivery {
		dead := poison(marked(d("2", "k1", 1, "b1", deadAt)))
		dead.DeadLetterReason, dead.Attempt = "max_attempts", "3"
		return []Delivery{
			d("1", "k0", 1, "a1", 0),
			// a1's batch: the poison record and k0/2 beside it; the
			// output rejects the first, the batch fails, and a1 hands the
			// shard off while it waits for its next attempt.
			poison(d("2", "k1", 1, "a1", 100)), d("3", "k0", 2, "a1", 100),
			poison(marked(d("2", "k1", 1, "b1", 3000))), marked(d("3", "k0", 2, "b1", 3000)),
			dead,
		}
	}

	ds := deliveries(3500)
	bare := Check(perKey, stream, ds, nil, nil, nil)
	assert.Equal(t, 2, bare.DupsOutsideWindows, "without the windows, k0/2 and the poison record are unexplained")
	tab := Check(perKey, stream, ds, poisonWindows(ds), nil, nil)
	assert.Zero(t, tab.DupsOutsideWindows, tab.String())
	assert.True(t, tab.OK(), tab.String())

	// A record dead-lettered before the first delivery held nothing back.
	early := deliveries(50)
	assert.Empty(t, poisonWindows(early))
}

// TestPoisonWindowsOnlyWhileThePoisonRecordWaited guards the poison
// record's window reaching records it never held back: given up, then read
// again after a rewind and given up once more, it held back what was first
// delivered beside it after the rewind, not what was first delivered
// between its first dead letter and the rewind.
func TestPoisonWindowsOnlyWhileThePoisonRecordWaited(t *testing.T) {
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	at := func(s int) time.Time { return t0.Add(time.Duration(s) * time.Second) }
	d := func(seq, inst string, s int) Delivery {
		return Delivery{K: "k" + seq, C: 1, Shard: "s0", Seq: seq, Inst: inst, At: at(s), Attempt: "1"}
	}
	handover := func(inst string, s int) Delivery {
		h := d("100", inst, s)
		h.Poison, h.Handover, h.MaxAttempts = true, true, 3
		return h
	}
	dead := func(inst string, s int) Delivery {
		dl := d("100", inst, s)
		dl.Poison, dl.DeadLetterReason, dl.Attempt = true, "max_attempts", "3"
		return dl
	}
	marked := func(dl Delivery) Delivery { dl.Redelivered = "true"; return dl }
	all := []Delivery{
		handover("a1", 0), dead("a1", 5),
		// Given up at 5 s: nothing waits behind it at 10 s.
		d("200", "a1", 10),
		// A rewind at 20 s: a1 reads it again, and 300 beside it for the
		// first time; b1 takes the shard over before it is given up again.
		handover("a1", 20), d("300", "a1", 20), marked(d("200", "b1", 21)), marked(d("300", "b1", 21)),
		dead("b1", 25),
	}
	ws := poisonWindows(all)
	held := map[string]bool{}
	for _, w := range ws {
		held[w.From.Sub(t0).String()] = true
	}
	assert.Equal(t, map[string]bool{"20s": true}, held, "only 300, first delivered while the poison record waited again, is behind it: %+v", ws)
}
