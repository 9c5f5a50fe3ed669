package reader

import (
	"regexp"
	"slices"
	"strings"
	"time"

	"github.com/connect-kinesis/connect-kinesis/internal/consumer"
)

// Isolating the records of a failed batch (docs/poison-records.md).
//
// A batch the pipeline failed is sent again in parts, one part in the
// pipeline at a time, in record order. A failure is charged to a record
// (counted against max_attempts) only when it is the record's own:
//
//   - the output singled the record out: it failed while others of the
//     same hand-over were processed (a verdict that names the failed
//     records among processed ones), or it failed alone with the error
//     it failed with each time since before another part of its batch
//     was processed. That failure is charged, and so is every
//     later failure of the record with that same error. Named records
//     are sent again together, and halved only if they fail otherwise;
//   - no record of the hand-over escaped (the part failed whole, or every
//     record of it was named) and the output did not single them out:
//     with redelivery.isolate, a part of more than one record is halved
//     (its first half first) and nobody is charged; a part of one record,
//     or without isolate the whole part, is sent again after a backoff,
//     and its records are charged only if the input's pipeline processed
//     some record (of any shard or stream of the input, Processed) since
//     their previous failure.
//
// A downstream outage fails every record alike and processes nothing, so
// it is charged to nobody, and it never drains a stream into the dead
// letter. The price: a record that fails alone on an input where nothing
// else is processed (a one-shard stream, the other shards idle) and that
// the output never singled out cannot be told from an outage; only
// max_record_age sends it on.
//
// Once a part of one record that had failed alone is resolved (processed,
// or bound for the dead letter), the parts still waiting are merged and
// sent as one.
//
// A record whose charged failures reach max_attempts, or that is older
// than max_record_age when it would be sent again (an outage included, as
// AWS Lambda's MaximumRecordAgeInSeconds), goes to the dead letter
// (deadletter.go). A record counts as done for the checkpoint once the
// pipeline processed it or the dead letter took it.

// verdict is the pipeline's answer on one hand-over.
type verdict struct {
	err     error   // a failure of the whole part
	errs    []error // a verdict per record of the part; nil when err is
	bounced bool    // refused by Admit: never reached the pipeline
}

func (v verdict) ok() bool {
	if v.bounced || v.err != nil {
		return false
	}
	for _, err := range v.errs {
		if err != nil {
			return false
		}
	}
	return true
}

// outcome is what a verdict did to the batch.
type outcome int

const (
	outcomeNone    outcome = iota
	outcomeDone            // every record of the part is done
	outcomeHalved          // the part failed whole and was halved: send the first half at once
	outcomeFailed          // records failed (charged if it was their own): back off before sending them again
	outcomeBounced         // the part never reached the pipeline: send it again once the lease is confirmed
)

// isolation is what the reader knows of each record of a batch that
// failed, under its delivery's mu.
type isolation struct {
	attempts []int   // hand-overs of each record by this reader
	failures []int   // failures charged to each record
	lastErr  []error // the last error each record failed with
	// failedAt is when each record last failed, or was first handed over
	// before it did: a failure no record of its hand-over escaped is
	// charged only if the pipeline processed a record since.
	failedAt []time.Time
	// alone says the record failed in a part of its own.
	// singled is the error the output singled each record out with; ""
	// if never.
	singled []string
	// sameSince is when each record began failing with its last error
	// (its first failure, or the first with another error than before).
	sameSince []time.Time
	// processedAt is when a verdict last processed records of the batch.
	processedAt time.Time
	alone       []bool
	done        []bool
	left        int // records not done
	prefix      int // records done from the start of the batch
	// todo are the parts to send, in order.
	todo [][]int
	// dead are records bound for the dead letter, in order.
	dead []deadEntry
}

type deadEntry struct {
	i      int
	reason string
}

// isolate starts following the records of d one by one; attempts is the
// hand-overs every record had.
func (d *delivery) isolate(attempts int) *isolation {
	n := len(d.records())
	iso := &isolation{attempts: make([]int, n), failures: make([]int, n), lastErr: make([]error, n),
		failedAt: make([]time.Time, n), alone: make([]bool, n), singled: make([]string, n), sameSince: make([]time.Time, n), done: make([]bool, n), left: n}
	for i := range iso.attempts {
		iso.attempts[i] = attempts
		iso.failedAt[i] = d.at
	}
	d.iso = iso
	d.r.isolationStarted(d)
	return iso
}

// indices of part p.
func (d *delivery) indices(p *part) []int {
	if p.idx != nil {
		return p.idx
	}
	all := make([]int, len(d.records()))
	for i := range all {
		all[i] = i
	}
	return all
}

// apply applies verdict v on part p; under d.mu.
func (d *delivery) apply(p *part, v verdict) outcome {
	iso := d.iso
	if iso == nil {
		iso = d.isolate(1)
	}
	idx := d.indices(p)
	if v.bounced {
		for _, i := range idx {
			iso.attempts[i]--
		}
		iso.todo = append([][]int{idx}, iso.todo...)
		return outcomeBounced
	}
	now := time.Now()
	var ok, failed []int
	for k, i := range idx {
		err := v.err
		if v.errs != nil {
			err = v.errs[k]
		}
		if err == nil {
			ok = append(ok, i)
			continue
		}
		failed = append(failed, i)
		if last := iso.lastErr[i]; last == nil || errorKind(last) != errorKind(err) {
			iso.sameSince[i] = now
		}
		iso.lastErr[i] = err
	}
	if len(ok) > 0 {
		d.r.processed.note(now)
		iso.processedAt = now
	}
	d.markDone(ok)
	pol := d.r.st.Config.Redelivery
	out := outcomeDone
	resolved := len(failed) == 0
	switch {
	case len(failed) == 0:
	case len(ok) == 0 && pol.Isolate && len(failed) > 1 && !iso.allSingled(failed):
		// Nothing of the part was processed: a record among them may be
		// the cause, or the downstream may be down. Halve, and charge
		// nobody.
		h := (len(failed) + 1) / 2
		iso.todo = append([][]int{failed[:h], failed[h:]}, iso.todo...)
		for _, i := range failed {
			iso.failedAt[i] = now
		}
		out = outcomeHalved
	default:
		out = outcomeFailed
		var again []int
		for _, i := range failed {
			if len(idx) == 1 {
				iso.alone[i] = true
			}
			msg := errorKind(iso.lastErr[i])
			// The output singles a record out when it processes others of
			// the same hand-over, or when the record fails alone with an
			// error it has failed with each time since a part of its batch
			// was processed. A failure with that same error later is the
			// record's own too.
			if len(ok) > 0 || (len(idx) == 1 && iso.processedAt.After(iso.sameSince[i])) {
				iso.singled[i] = msg
			}
			// Else only a pipeline that processed something since the
			// record's previous failure shows the downstream is up.
			charged := (iso.singled[i] != "" && iso.singled[i] == msg) || d.r.processed.since(iso.failedAt[i])
			iso.failedAt[i] = now
			if charged {
				iso.failures[i]++
			}
			if charged && pol.Enabled() && pol.MaxAttempts > 0 && iso.failures[i] >= pol.MaxAttempts {
				iso.dead = append(iso.dead, deadEntry{i: i, reason: consumer.DeadLetterMaxAttempts})
				continue
			}
			if charged {
				d.warnBlocked(i)
			}
			again = append(again, i)
		}
		resolved = len(again) == 0
		if len(again) > 0 {
			iso.todo = append([][]int{again}, iso.todo...)
		}
	}
	if len(idx) == 1 && resolved && (iso.alone[idx[0]] || iso.failures[idx[0]] > 0) && len(iso.todo) > 1 {
		// The record that failed alone is resolved: what is left of the
		// batch goes again as one part. (A record processed alone on its
		// first try is a half whose other half failed: that one is next.)
		mergeTodo(iso)
	}
	return out
}

// allSingled says every record of is fails with the error the output
// singled it out with.
func (iso *isolation) allSingled(is []int) bool {
	for _, i := range is {
		if iso.singled[i] == "" || iso.singled[i] != errorKind(iso.lastErr[i]) {
			return false
		}
	}
	return true
}

// idRun is a run of characters that can only be an identifier or a count:
// digits, or hex of eight or more (a request id, a UUID, a time).
var idRun = regexp.MustCompile(`[0-9a-fA-F]{8,}|[0-9]+`)

// errorKind is an error's text with its numbers and ids blanked, so that
// one refusal compares equal from one attempt to the next although each
// answer carries a request id of its own. A number from 100 to 599 that
// stands alone is kept: it is a status code, and an output that answers a
// refusal with 422 and an outage with 503 gives two errors, not one.
func errorKind(err error) string {
	text := err.Error()
	var b strings.Builder
	last := 0
	for _, m := range idRun.FindAllStringIndex(text, -1) {
		if statusCode(text, m[0], m[1]) {
			continue
		}
		b.WriteString(text[last:m[0]])
		b.WriteByte('#')
		last = m[1]
	}
	b.WriteString(text[last:])
	return b.String()
}

// statusCode says text[i:j] is three digits from 100 to 599 with no letter
// or digit on either side.
func statusCode(text string, i, j int) bool {
	if j-i != 3 || text[i] < '1' || text[i] > '5' {
		return false
	}
	for _, c := range text[i:j] {
		if c < '0' || c > '9' {
			return false
		}
	}
	word := func(c byte) bool {
		return c >= '0' && c <= '9' || c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z'
	}
	return (i == 0 || !word(text[i-1])) && (j == len(text) || !word(text[j]))
}

// mergeTodo makes the parts waiting to be sent one.
func mergeTodo(iso *isolation) {
	var rest []int
	for _, t := range iso.todo {
		rest = append(rest, t...)
	}
	iso.todo = [][]int{rest}
}

// markDone counts records of the batch as done: the tracker may pass them
// once every record before them is done too. Under d.mu.
func (d *delivery) markDone(is []int) {
	iso := d.iso
	var ids []uint64
	for _, i := range is {
		if iso.done[i] {
			continue
		}
		iso.done[i] = true
		iso.left--
		if d.ids != nil {
			ids = append(ids, d.ids[i])
		}
	}
	if d.ids != nil {
		if len(ids) > 0 {
			d.r.tracker.ackAll(ids)
		}
		if i := slices.Index(iso.done, false); i >= 0 {
			d.r.isolationProgress(d, d.records()[i].Arrival)
		}
		return
	}
	before := iso.prefix
	for iso.prefix < len(iso.done) && iso.done[iso.prefix] {
		iso.prefix++
	}
	if iso.left == 0 {
		d.r.tracker.ack(d.id)
		return
	}
	d.r.isolationProgress(d, d.records()[iso.prefix].Arrival)
	moved := iso.prefix > before
	var pos consumer.Position
	if moved {
		pos = recordPosition(d.records()[iso.prefix-1])
	}
	// What the checkpoint does not cover: the records from the first that
	// is not done, done ones behind it included.
	d.r.tracker.advance(d.id, pos, moved, len(iso.done)-iso.prefix)
}

// next takes the next part to hand over, under d.mu: nil when nothing is
// to be sent now (every record is done, or records wait for the dead
// letter, which goes first). Records older than max_record_age are bound
// for the dead letter instead. The part's records count one more attempt.
func (d *delivery) next(now time.Time) *part {
	iso := d.iso
	if d.allDone {
		return nil
	}
	if iso == nil {
		// A lane's batch, not handed over yet.
		d.out = &d.whole
		return d.out
	}
	pol := d.r.st.Config.Redelivery
	for len(iso.dead) == 0 && len(iso.todo) > 0 {
		idx := iso.todo[0]
		iso.todo = iso.todo[1:]
		if pol.Enabled() && pol.MaxRecordAge > 0 {
			keep := idx[:0:0]
			for _, i := range idx {
				if iso.attempts[i] > 0 && now.Sub(d.records()[i].Arrival) > pol.MaxRecordAge {
					iso.dead = append(iso.dead, deadEntry{i: i, reason: consumer.DeadLetterMaxRecordAge})
					continue
				}
				keep = append(keep, i)
			}
			if len(keep) < len(idx) {
				if len(keep) > 0 {
					iso.todo = append([][]int{keep}, iso.todo...)
				}
				continue
			}
		}
		for _, i := range idx {
			iso.attempts[i]++
		}
		d.out = d.partOf(idx)
		return d.out
	}
	return nil
}

// partOf is the part of records idx: the batch itself when they are all
// of it, else a batch of its own.
func (d *delivery) partOf(idx []int) *part {
	iso := d.iso
	recs := d.records()
	if len(idx) == len(recs) {
		d.batch.Attempts = append([]int(nil), iso.attempts...)
		return &d.whole
	}
	p := &part{d: d, idx: idx}
	sub := make([]consumer.Record, len(idx))
	attempts := make([]int, len(idx))
	for k, i := range idx {
		sub[k], attempts[k] = recs[i], iso.attempts[i]
	}
	b := consumer.MakeBatch(d.batch.Stream, d.batch.Shard, sub, d.batch.MillisBehind, p)
	b.Attempts = attempts
	b.DeliveredBefore = d.batch.DeliveredBefore
	p.batch = &b
	return p
}
