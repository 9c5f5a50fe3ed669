package reader

import (
	"testing"
	"time"

	"github.com/connect-kinesis/connect-kinesis/internal/consumer"
	"github.com/connect-kinesis/connect-kinesis/internal/consumer/consumertest"
	"github.com/stretchr/testify/assert"
)

// Once the reader stops fetching (hand-off, shutdown), no lane hands over
// another batch, though records still wait in its queue: they are the next
// owner's, from the checkpoint this reader commits.
func TestALaneTakesNoQueuedBatchOnceTheReaderStopsFetching(t *testing.T) {
	t.Parallel()
	r := pastDeadlineReader(t, consumertest.NewStore(time.Minute), "shardId-000000000000")
	ls := newLaneSet(r, 2)
	var recs []consumer.Record
	for i := range 20 {
		recs = append(recs, consumer.Record{Sequence: itoa(i + 1), PartitionKey: "k" + itoa(i)})
	}
	ls.push(recs, 0)
	r.Stop()
	for i := range 2 {
		got, _, _, ok := ls.take(i, 5)
		assert.False(t, ok, "lane %d took %d queued records after the reader stopped fetching", i, len(got))
	}
}
