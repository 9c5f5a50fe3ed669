package producer

import (
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/connect-kinesis/connect-kinesis/internal/kinesisx"
	"github.com/connect-kinesis/connect-kinesis/internal/producer/producertest"
)

// An ordered output's batch sized to the stream's shards (500 records per
// shard, docs/performance.md) holds far more than one request. These tests
// write such a batch as one Write, as the output does.

func TestOrderedBatchOfManyRequestsGoesOutInOneRound(t *testing.T) {
	// 4,000 records of 4,000 keys over 4 shards: no key twice, so one round
	// of 8 full requests, all in flight at once. (One request per shard per
	// round took 9 to 10 requests over 3 round trips.)
	const shards, n = 4, 4000
	api := &fakeAPI{shards: testShards(shards), delay: 50 * time.Millisecond}
	p := newTestProducer(api, func(c *Config) { c.Ordered = true; c.MaxInFlight = 16 })
	p.SetShardMap(testShardMap(t, shards))

	require.Nil(t, p.Write(t.Context(), keyedEntries(0, n, n)))

	counts, bytes := requestSizes(api.calls)
	assert.Equal(t, []int{500, 500, 500, 500, 500, 500, 500, 500}, counts, "full requests")
	for _, b := range bytes {
		assert.LessOrEqual(t, b, kinesisx.MaxPutRecordsBytes)
	}
	assert.Equal(t, int32(8), api.maxSeen.Load(), "every request of the round in flight at once")
}

func TestOrderedBatchOfManyRequestsKeepsEachKeysOrderThroughPartialFailures(t *testing.T) {
	// 8,000 records of 1,000 keys over 4 shards: each key's 8 records span
	// several requests to its shard, and a fifth of the entries (and some
	// whole requests) are refused and retried.
	const shards, n, keys = 4, 8000, 1000
	for _, aggregate := range []bool{false, true} {
		t.Run(fmt.Sprintf("aggregation %v", aggregate), func(t *testing.T) {
			api := &fakeAPI{shards: testShards(shards), respond: flakyResponder(17, 0.2)}
			p := newTestProducer(api, func(c *Config) {
				c.Ordered = true
				c.MaxInFlight = 8
				c.Backoff.MaxRetries = 100
				c.Aggregation = Aggregation{Enabled: aggregate, MaxBytes: 1024, MaxRecords: 20}
			})
			p.SetShardMap(testShardMap(t, shards))

			// Write returns (the output acknowledges) once every record
			// is written, not before.
			require.Nil(t, p.Write(t.Context(), keyedEntries(0, n, keys)))
			stream, recs := api.stream()
			view, err := producertest.KCLRead(stream, recs)
			require.NoError(t, err)
			assert.Len(t, view.Records, n, "every record landed once, before Write returned")

			counts, bytes := requestSizes(api.calls)
			for i := range counts {
				assert.LessOrEqual(t, counts[i], kinesisx.MaxPutRecordsCount)
				assert.LessOrEqual(t, bytes[i], kinesisx.MaxPutRecordsBytes)
			}
			inv, err := producertest.Inversions(view.Records, seqOf)
			require.NoError(t, err)
			assert.Zero(t, inv, "per-key inversions")
			if !aggregate {
				// (Aggregated, a round's aggregates fit one request.)
				assert.Greater(t, api.maxSeen.Load(), int32(1), "requests in parallel")
			}
			assert.LessOrEqual(t, api.maxSeen.Load(), int32(8), "within max_in_flight")
		})
	}
}
