package consumer

import (
	"testing"

	"github.com/stretchr/testify/assert"
)

// The held-bytes gauge follows every grant, also when the queue stops at
// a head that does not fit (issue 33, item 10). Before the fix the grant
// loop returned early without setting it: the gauge said 40 while the
// budget held 90.
func TestBudgetGaugeFollowsPartialGrants(t *testing.T) {
	b := newBudget(100, newMetrics(testMetrics(t)))
	b.charge(100)
	w1, w2 := b.enqueue(50, 10), b.enqueue(50, 50)
	b.giveBack(60) // w1 gets its 50; w2 does not fit in the 10 left
	<-w1.ready
	held, waiting, _ := b.state()
	assert.Equal(t, int64(90), held)
	assert.Equal(t, 1, waiting)
	v, _ := testGauges.get(MetricBufferedBytes + "{}")
	assert.Equal(t, int64(90), v, "kinesis_input_buffered_bytes")
	b.cancel(w2)
}
