package chaos

import "strconv"

// deadLetters are the records the inputs wrote to their dead letter
// (redelivery.dead_letter): given up, not delivered.
type deadLetters struct {
	ids      map[[2]string]bool      // shard, sequence
	messages map[string]map[int]bool // key, counter
}

func (d deadLetters) has(shard, seq string) bool { return d.ids[[2]string{shard, seq}] }

func (d deadLetters) hasMessage(k string, c int) bool { return d.messages[k][c] }

// splitDeadLetters separates the lines the inputs' dead letters wrote
// (DeadLetterReason set) from the deliveries. A dead-lettered record counts
// as done, not lost; only poison records may be given up, so a good one
// among them is a problem. It fills t's Poison, DeadLettered and
// DeadLetteredGood.
func splitDeadLetters(stream []Record, all []Delivery, t *Table, problem func(format string, args ...any)) ([]Delivery, deadLetters) {
	poison := map[[2]string]bool{}
	for _, r := range stream {
		if r.Poison {
			poison[[2]string{r.Shard, r.Seq}] = true
		}
	}
	t.Poison = len(poison)
	dead := deadLetters{ids: map[[2]string]bool{}, messages: map[string]map[int]bool{}}
	delivered := make([]Delivery, 0, len(all))
	for _, d := range all {
		if d.DeadLetterReason == "" {
			delivered = append(delivered, d)
			continue
		}
		id := [2]string{d.Shard, d.Seq}
		if !dead.ids[id] && !poison[id] {
			t.DeadLetteredGood++
			problem("dead-lettered a good record: %s/%d of shard %s (seq %s) by %s, %s", d.K, d.C, d.Shard, d.Seq, d.Inst, d.DeadLetterReason)
		}
		dead.ids[id] = true
		if n, err := strconv.Atoi(d.Attempt); err == nil {
			if t.DeadLetterAttempts[0] == 0 || n < t.DeadLetterAttempts[0] {
				t.DeadLetterAttempts[0] = n
			}
			t.DeadLetterAttempts[1] = max(t.DeadLetterAttempts[1], n)
		}
		if dead.messages[d.K] == nil {
			dead.messages[d.K] = map[int]bool{}
		}
		dead.messages[d.K][d.C] = true
	}
	t.DeadLettered = len(dead.ids)
	return delivered, dead
}
