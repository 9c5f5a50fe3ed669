package chaos

import (
	"fmt"
	"strings"
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

// withDeadLetters lists the delivery files and their dead-letter files.
func withDeadLetters(outs []string) []string {
	all := append([]string(nil), outs...)
	for _, o := range outs {
		all = append(all, deadLetterPath(o))
	}
	return all
}

// indent puts n spaces before each line of s.
func indent(s string, n int) string {
	pad := strings.Repeat(" ", n)
	return pad + strings.ReplaceAll(strings.TrimRight(s, "\n"), "\n", "\n"+pad)
}

// instanceOutput is an instance's output and dead letter: mapping (the
// pipeline's, which makes a record its delivery line) is applied to what
// the input gives up too, with the reason; a poison message is rejected,
// the others go to inner (an output, as YAML under `output:`); the dead
// letter is the file dlq.
func instanceOutput(mapping, inner, dlq string) string {
	return fmt.Sprintf(`output:
  switch:
    cases:
      - check: this.poison == true
        output: { reject: 'poison record ${! this.k }/${! this.c }' }
      - output:
%s
output_resources:
  - label: %s
    file: { path: %s, codec: lines }
    processors:
      - mapping: |
%s
          root.dead_letter_reason = @kinesis_dead_letter_reason.or("unknown")
`, indent(inner, 10), deadLetterLabel, dlq, indent(mapping, 10))
}

// heldBehindPoison is the index in recs (one shard's records in stream
// order) of the poison record the shard waits behind, and true, when the
// documented limit "A poison record where nothing else flows" holds it:
// the first record neither delivered nor dead-lettered (done) is poison,
// and the instance that first delivered the record before it delivered
// nothing after that (all: every delivery), so no record of its input was
// processed after the poison record's first failure and none of its
// failures was charged. The records from it on are not lost: uncommitted,
// they wait for the shard's next owner.
func heldBehindPoison(recs []Record, done func(seq string) bool, first func(seq string) (Delivery, bool), all []Delivery) (int, bool) {
	i := 0
	for i < len(recs) && done(recs[i].Seq) {
		i++
	}
	if i == 0 || i == len(recs) || !recs[i].Poison {
		return 0, false
	}
	prev, ok := first(recs[i-1].Seq)
	if !ok {
		return 0, false
	}
	for _, d := range all {
		if d.Inst == prev.Inst && d.At.After(prev.At) {
			return 0, false
		}
	}
	return i, true
}
