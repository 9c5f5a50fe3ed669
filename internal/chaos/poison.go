package chaos

import (
	"fmt"
	"strings"
	"time"
)

// Poison records (issue 36, docs/poison-records.md). The producers mark a
// few messages poison: `root.poison = true` on every 1601st, from the
// 801st (poisonProducerLine). The instances' outputs reject a poison
// message, always; their input delivers it again until
// redelivery.max_attempts, then writes it to its dead letter, a file of
// lines like the deliveries' with the reason (dead_letter_reason). The
// checker counts a dead-lettered poison record as done, not lost, and a
// good record in a dead letter as a failure (splitDeadLetters).

// poisonProducerLine is the producers' mapping line that marks poison
// messages ($n is the message's number from 0; %% as it goes through
// fmt.Sprintf with the producer's config).
const poisonProducerLine = `root.poison = if $n %% 1601 == 800 { true } else { deleted() }`

// deadLetterLabel is the label of the instances' dead-letter output
// resource, named by their input's redelivery.dead_letter.
const deadLetterLabel = "dead_letter"

// deadLetterPath is the dead-letter file of the incarnation whose
// deliveries go to out.
func deadLetterPath(out string) string { return strings.TrimSuffix(out, ".jsonl") + "-dlq.jsonl" }

// handoverPath is the file of the poison records' hand-overs of the
// incarnation whose deliveries go to out: a line like a delivery's, with
// handover and max_attempts set, each time its output rejected one.
func handoverPath(out string) string { return strings.TrimSuffix(out, ".jsonl") + "-poison.jsonl" }

// withDeadLetters lists the delivery files and their dead-letter files.
func withDeadLetters(outs []string) []string {
	all := append([]string(nil), outs...)
	for _, o := range outs {
		all = append(all, deadLetterPath(o))
	}
	return all
}

// withHandovers lists the delivery files, their dead-letter files and
// their poison hand-over files.
func withHandovers(outs []string) []string {
	all := withDeadLetters(outs)
	for _, o := range outs {
		all = append(all, handoverPath(o))
	}
	return all
}

// splitHandovers separates the poison records' hand-over lines (handover
// set) from the deliveries and dead-letter lines.
func splitHandovers(all []Delivery) (ds, hs []Delivery) {
	for _, d := range all {
		if d.Handover {
			hs = append(hs, d)
		} else {
			ds = append(ds, d)
		}
	}
	return ds, hs
}

// indent puts n spaces before each line of s.
func indent(s string, n int) string {
	pad := strings.Repeat(" ", n)
	return pad + strings.ReplaceAll(strings.TrimRight(s, "\n"), "\n", "\n"+pad)
}

// instanceOutput is an instance's output and dead letter: mapping (the
// pipeline's, which makes a record its delivery line) is applied to what
// the input gives up too, with the reason; a poison message is written to
// the file handovers (with handover: true and the input's maxAttempts) and
// rejected, the others go to inner (an output, as YAML under `output:`);
// the dead letter is the file dlq.
func instanceOutput(mapping, inner, dlq, handovers, maxAttempts string) string {
	return fmt.Sprintf(`output:
  switch:
    cases:
      - check: this.poison == true
        output:
          broker:
            pattern: fan_out_sequential_fail_fast
            outputs:
              - file: { path: %s, codec: lines }
                processors:
                  - mapping: 'root = this.merge({"handover": true, "max_attempts": %s})'
              - reject: 'poison record ${! this.k }/${! this.c }'
      - output:
%s
output_resources:
  - label: %s
    file: { path: %s, codec: lines }
    processors:
      - mapping: |
%s
          root.dead_letter_reason = @kinesis_dead_letter_reason.or("unknown")
`, handovers, maxAttempts, indent(inner, 10), deadLetterLabel, dlq, indent(mapping, 10))
}

// heldBehindPoison is the index in recs (one shard's records in stream
// order) of the poison record the shard waits behind, the instance that
// holds it there and when it last handed it over, and true, when the
// documented limit "Nothing else flows" holds it: the first record neither
// delivered nor dead-lettered (done) is poison, and the instance that
// handed it over last (handovers: the outputs' lines of each rejection)
// cannot have charged it max_attempts times. A failure is charged only if
// the input processed a record since the record's previous failure (or its
// hand-over, for the first), and the failures follow the hand-overs, so
// with m of that instance's hand-overs of it before its last delivery of
// anything (all; ackSlack after it), at most m+1 failures were charged,
// none when m is 0; all of them when a hand-over of it held other records
// (the output may have singled it out).
// The records from it on are not lost: uncommitted, they wait for the
// shard's next owner.
//
// Judged from the hand-overs rather than from the record before it: the
// poison record may come into the stream after everything else its holder
// processed (seed 9: the producer's retry wrote it 3 s after the rest), or
// be handed over by a newer holder than the one that delivered the record
// before it.
func heldBehindPoison(recs []Record, done func(seq string) bool, handovers, all []Delivery) (int, string, time.Time, bool) {
	i := 0
	for i < len(recs) && done(recs[i].Seq) {
		i++
	}
	if i == len(recs) || !recs[i].Poison {
		return 0, "", time.Time{}, false
	}
	var last Delivery
	for _, h := range handovers {
		if h.Shard == recs[i].Shard && h.Seq == recs[i].Seq && !h.At.Before(last.At) {
			last = h
		}
	}
	if last.Inst == "" || last.MaxAttempts <= 0 {
		return 0, "", time.Time{}, false
	}
	var processed time.Time
	for _, d := range all {
		if d.Inst == last.Inst && d.At.After(processed) {
			processed = d.At
		}
	}
	// A delivery line is stamped before its output acknowledges it (a slow
	// output sleeps per message), and the input counts a record processed
	// at the acknowledgement: hand-overs up to ackSlack after the last
	// stamp may follow a processing.
	m, n := 0, 0
	for _, h := range handovers {
		if h.Inst == last.Inst && h.Shard == recs[i].Shard && h.Seq == recs[i].Seq {
			n++
			if h.At.Before(processed.Add(ackSlack)) {
				m++
			}
		}
	}
	charged := m
	if m > 0 {
		charged++
	}
	// A poison record the output rejected while it processed records of
	// the same hand-over is singled out: that failure and every later one
	// with the same error are charged, whatever else the input processed.
	// Each hand-over line carries the size of the batch the pipeline got
	// (batch_size() in the mapping): one of more than one record, or of
	// an unknown size, may have singled it out.
	for _, h := range handovers {
		if h.Inst == last.Inst && h.Shard == recs[i].Shard && h.Seq == recs[i].Seq && h.Batch != 1 {
			charged = n
			break
		}
	}
	return i, last.Inst, last.At, charged < last.MaxAttempts
}

// ackSlack bounds how long after the pipeline stamped a delivery line its
// output acknowledged it: a batch through the soak's slow output (up to
// 10 ms a message).
const ackSlack = 2 * time.Second
