package chaos

import (
	"testing"

	"github.com/stretchr/testify/assert"
)

// TestSoakVerdictLineShowsEveryExcuse guards excuses counted out of sight:
// the verdict line, the one a reader keeps, names every count the soak
// let off (unmarked duplicates after a wipe no live holder saw, or stamped
// late by a paused instance; order breaks after a nacking output's
// delivery; budget waits within the bound once faults are taken out, or
// behind calls Kinesis did not answer; duplicates behind a poison record),
// each with its count, zero or not.
func TestSoakVerdictLineShowsEveryExcuse(t *testing.T) {
	v := Verdict{OrderByNacks: 5, BudgetWaitsExcused: 6, BudgetWaitsOnKinesis: 7}
	v.Table.Marks.Excused, v.Table.Marks.Reordered = 3, 4
	v.Table.OrderByNacks = 2
	v.Table.Windows = []WindowTally{{What: "behind a poison record", Kind: "behind a poison record", Dups: 8, Bound: 9}}
	line := v.Line()
	for _, want := range []string{
		"excused_unmarked_after_wipe=3", "excused_unmarked_stamped_late=4", "excused_order_after_nacks=5",
		"excused_budget_waits=6", "excused_budget_waits_on_kinesis=7", "excused_dups_behind_poison=8",
	} {
		assert.Contains(t, line, " "+want, "the verdict line names the excuse with its count")
	}
	assert.Contains(t, Verdict{}.Line(), " excused_order_after_nacks=0", "a zero excuse is shown too")
}
