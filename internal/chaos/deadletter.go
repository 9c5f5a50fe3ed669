package chaos

import (
	"sort"
	"strconv"

	"github.com/connect-kinesis/connect-kinesis/internal/consumer"
)

// behindPoisonKind names the explanation, and the window of one first
// delivery, of a duplicate behind a poison record (behindPoison).
const behindPoisonKind = "behind a poison record"

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

// behindPoison says whether first delivery f waited behind a poison record
// of its shard: a record at or before it that an input dead-lettered after
// f was delivered. Every chaos and soak output rejects the poison records,
// and the input then redelivers only them: records delivered beside or
// after one on its shard stay behind the checkpoint until it is
// dead-lettered, and a hand-off meanwhile has the next owner deliver them
// again, marked (docs/poison-records.md, "Per-key order when the output
// names failures"). all holds the dead letters' lines.
func behindPoison(f Delivery, all []Delivery) bool {
	fp, err := consumer.ParsePosition(f.Seq)
	if err != nil {
		return false
	}
	for _, dl := range all {
		if dl.DeadLetterReason == "" || dl.Shard != f.Shard || dl.At.Before(f.At) {
			continue
		}
		if pp, perr := consumer.ParsePosition(dl.Seq); perr == nil && pp.Compare(fp) <= 0 {
			return true
		}
	}
	return false
}

// poisonWindows explains, for Check, the duplicates whose first delivery
// waited behind a poison record (behindPoison): a window holding that
// first delivery alone. The chaos suite's short form failed without them
// when a hand-off of shard 3 came while its poison record k1/161 waited for
// its attempts: five records delivered beside it were delivered again,
// marked, by the next owner (CI, 2026-12-04).
func poisonWindows(all []Delivery) []Window {
	delivered := make([]Delivery, 0, len(all))
	for _, d := range all {
		if d.DeadLetterReason == "" {
			delivered = append(delivered, d)
		}
	}
	sort.SliceStable(delivered, func(i, j int) bool { return delivered[i].At.Before(delivered[j].At) })
	first := map[[2]string]Delivery{}
	again := map[[2]string]bool{}
	for _, d := range delivered {
		id := [2]string{d.Shard, d.Seq}
		if _, seen := first[id]; seen {
			again[id] = true
			continue
		}
		first[id] = d
	}
	var out []Window
	for id := range again {
		if f := first[id]; behindPoison(f, all) {
			out = append(out, Window{What: behindPoisonKind, Inst: f.Inst, Shards: map[string]bool{f.Shard: true}, From: f.At, To: f.At})
		}
	}
	return out
}
