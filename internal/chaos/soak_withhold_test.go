package chaos

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
)

// The time faults withheld an incarnation's deliveries: a fault lasts to
// a lease after its end (its readers wait for a renewal), one under way
// lasts to the time asked about, overlapping faults count once, another
// incarnation's own fault does not count, and each fault's name is listed
// once however many spans it has.
func TestSoakCountsWithheldTimeOnceAndNamesEachFaultOnce(t *testing.T) {
	const lease = 5 * time.Second
	s := &soak{runner: &runner{plan: Plan{LeasePeriod: lease}}}

	pause := s.withholdBegin("redis-pause", "")
	t0 := pause.from
	s.withholdEnd(pause)
	end := pause.to
	assert.GreaterOrEqual(t, end.Sub(t0), lease, "a fault withholds to a lease after its end")
	s.withholdEnd(pause)
	assert.Equal(t, end, pause.to, "the first end counts")

	far := t0.Add(time.Minute)
	got, by := s.withheldFor("b19", t0.Add(-time.Minute), far)
	assert.Equal(t, end.Sub(t0), got)
	assert.Equal(t, []string{"redis-pause"}, by)

	// A second Redis pause overlapping the first, the incarnation's own
	// pause after both, and another incarnation's cut-off.
	s.withholdings = append(s.withholdings,
		&withholding{what: "redis-pause", from: t0.Add(2 * time.Second), to: end.Add(3 * time.Second)},
		&withholding{what: "pause b19", inst: "b19", from: t0.Add(20 * time.Second), to: t0.Add(30 * time.Second)},
		&withholding{what: "redis-cut a3", inst: "a3", from: t0.Add(40 * time.Second), to: t0.Add(50 * time.Second)},
	)
	got, by = s.withheldFor("b19", t0, far)
	assert.Equal(t, end.Sub(t0)+3*time.Second+10*time.Second, got, "overlaps counted once, a3's cut-off not at all")
	assert.Equal(t, []string{"redis-pause", "pause b19"}, by)

	got, by = s.withheldFor("a3", t0.Add(35*time.Second), far)
	assert.Equal(t, 10*time.Second, got)
	assert.Equal(t, []string{"redis-cut a3"}, by)

	// A fault under way withholds up to the time asked about, and only
	// the part inside the interval counts.
	s.withholdings = append(s.withholdings, &withholding{what: "redis-stall", from: t0.Add(55 * time.Second)})
	got, by = s.withheldFor("c1", t0.Add(50*time.Second), far)
	assert.Equal(t, 5*time.Second, got)
	assert.Equal(t, []string{"redis-stall"}, by)
}
