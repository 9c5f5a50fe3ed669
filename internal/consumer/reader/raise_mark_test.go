package reader

import (
	"testing"

	"github.com/stretchr/testify/assert"

	"github.com/connect-kinesis/connect-kinesis/internal/consumer"
	"github.com/connect-kinesis/connect-kinesis/internal/consumer/source"
)

// A reader whose shard a re-seed won back from a newcomer marks its
// deliveries against the newcomer's mark once told it, and never against a
// lower one: the records the newcomer delivered come again marked.
//
// Guards: deliveries kept the take's mark after a re-seed raised it.
func TestARaisedMarkMarksTheRecordsANewcomerDelivered(t *testing.T) {
	t.Parallel()
	r := &Reader{start: source.Start{DeliveredBefore: consumer.Position{Sequence: "120"}}}
	rec := func(seq string) consumer.Record { return consumer.Record{Sequence: seq} }
	b := consumer.Batch{Records: []consumer.Record{rec("150"), rec("950")}, DeliveredBefore: r.deliveredBefore()}
	assert.False(t, b.Redelivered(0), "before the re-seed: the take's mark")
	r.RaiseDelivered(consumer.Position{Sequence: "900"})
	r.RaiseDelivered(consumer.Position{Sequence: "500"})
	b.DeliveredBefore = r.deliveredBefore()
	assert.True(t, b.Redelivered(0), "a record the newcomer delivered")
	assert.False(t, b.Redelivered(1), "a record past the newcomer's mark")
}
