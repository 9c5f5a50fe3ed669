package chaos

import (
	"slices"
	"sort"
	"strconv"
	"time"

	"github.com/connect-kinesis/connect-kinesis/internal/consumer"
)

// behindPoisonKind names the explanation, and the window of one first
// delivery, of a duplicate behind a poison record (poisonHolds).
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

// poisonRereadSlack is how long after a first delivery a poison record
// given up before it may be handed over again and still count as read
// beside it: the pipeline stamps each message as it maps it, and batches
// of one shard may be mapped by parallel pipeline threads.
const poisonRereadSlack = time.Second

// poisonHolds indexes all (the deliveries, the dead letters' lines and the
// poison records' hand-overs) once, and says whether a first delivery f
// waited behind a poison record of its shard: a record at or before it
// that an input dead-lettered after f was delivered, and had not already
// given up when f was delivered, or was read again since (a rewind: a kill
// before its commit, a wipe's re-read from the start position). Every
// chaos and soak output rejects the poison records, and the input then
// redelivers only them: records delivered beside or after one on its
// shard stay behind the checkpoint until it is dead-lettered, and a
// hand-off meanwhile has the next owner deliver them again, marked
// (docs/poison-records.md, "Per-key order when the output names
// failures"). A poison record given up early and given up again after a
// wipe's re-read held back none of the records first delivered between
// the two: counting them would give each a second allowance beside the
// wipe's.
func poisonHolds(all []Delivery) func(f Delivery) bool {
	type record struct {
		pos             consumer.Position
		dead, attempted []time.Time
	}
	byID := map[[2]string]*record{}
	for _, d := range all {
		if d.DeadLetterReason == "" {
			continue
		}
		id := [2]string{d.Shard, d.Seq}
		if byID[id] == nil {
			pos, err := consumer.ParsePosition(d.Seq)
			if err != nil {
				continue
			}
			byID[id] = &record{pos: pos}
		}
		byID[id].dead = append(byID[id].dead, d.At)
	}
	for _, d := range all {
		if r := byID[[2]string{d.Shard, d.Seq}]; r != nil && d.DeadLetterReason == "" {
			r.attempted = append(r.attempted, d.At)
		}
	}
	byShard := map[string][]*record{}
	for id, r := range byID {
		slices.SortFunc(r.dead, time.Time.Compare)
		slices.SortFunc(r.attempted, time.Time.Compare)
		byShard[id[0]] = append(byShard[id[0]], r)
	}
	return func(f Delivery) bool {
		fp, err := consumer.ParsePosition(f.Seq)
		if err != nil {
			return false
		}
		for _, r := range byShard[f.Shard] {
			if r.pos.Compare(fp) > 0 {
				continue
			}
			// The first dead letter at or after f, and the last before.
			i, _ := slices.BinarySearchFunc(r.dead, f.At, time.Time.Compare)
			if i == len(r.dead) {
				continue
			}
			if i == 0 {
				return true
			}
			given := r.dead[i-1]
			j, _ := slices.BinarySearchFunc(r.attempted, given, time.Time.Compare)
			for ; j < len(r.attempted) && !r.attempted[j].After(f.At.Add(poisonRereadSlack)); j++ {
				if r.attempted[j].After(given) {
					return true
				}
			}
		}
		return false
	}
}

// poisonWindows explains, for Check, the duplicates whose first delivery
// waited behind a poison record (poisonHolds): a window holding that
// first delivery alone. The chaos suite's short form failed without them
// when a hand-off of shard 3 came while its poison record k1/161 waited for
// its attempts: five records delivered beside it were delivered again,
// marked, by the next owner (CI, 2026-12-04).
func poisonWindows(all []Delivery) []Window {
	delivered := make([]Delivery, 0, len(all))
	for _, d := range all {
		if d.DeadLetterReason == "" && !d.Handover {
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
	held := poisonHolds(all)
	var out []Window
	for id := range again {
		if f := first[id]; held(f) {
			out = append(out, Window{What: behindPoisonKind, Inst: f.Inst, Shards: map[string]bool{f.Shard: true}, From: f.At, To: f.At})
		}
	}
	return out
}
