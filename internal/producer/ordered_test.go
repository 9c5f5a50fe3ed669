package producer

import (
	"fmt"
	"math/rand/v2"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/kinesis/types"
	"github.com/aws/smithy-go"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/connect-kinesis/connect-kinesis/internal/kinesisx"
	"github.com/connect-kinesis/connect-kinesis/internal/producer/producertest"
)

// keyedEntries returns n entries over keys partition keys, round robin, with
// data "<key>/<n>" numbered from first in the order they are to land.
func keyedEntries(first, n, keys int) []Entry {
	out := make([]Entry, n)
	for i := range out {
		key := fmt.Sprintf("key-%d", (first+i)%keys)
		out[i] = Entry{PartitionKey: key, Data: []byte(fmt.Sprintf("%s/%d", key, first+i))}
	}
	return out
}

func seqOf(data []byte) (int, error) {
	_, n, ok := strings.Cut(string(data), "/")
	if !ok {
		return 0, fmt.Errorf("record %q has no sequence", data)
	}
	return strconv.Atoi(n)
}

// stream returns what the fake holds as a stream a reader reads: shards
// parents first, each shard's records in the order they landed.
func (f *fakeAPI) stream() ([]types.Shard, []producertest.Record) {
	f.mu.Lock()
	defer f.mu.Unlock()
	byShard := map[string][]producertest.Record{}
	for n, l := range f.landed {
		byShard[l.shard] = append(byShard[l.shard], producertest.Record{ShardID: l.shard, Record: types.Record{
			Data: l.entry.Data, PartitionKey: l.entry.PartitionKey, SequenceNumber: aws.String(fmt.Sprint(n)),
		}})
	}
	shards := append([]types.Shard(nil), f.listing()...)
	var recs []producertest.Record
	for _, s := range producertest.LineageOrder(shards) {
		recs = append(recs, byShard[aws.ToString(s.ShardId)]...)
	}
	return shards, recs
}

// flakyResponder refuses rate of the entries and fails whole requests now
// and then, like a throttled stream with 5xx errors, deterministically.
func flakyResponder(seed uint64, rate float64) func(int, []types.PutRecordsRequestEntry) (map[int]string, error) {
	var mu sync.Mutex
	rnd := rand.New(rand.NewPCG(seed, seed))
	return func(_ int, in []types.PutRecordsRequestEntry) (map[int]string, error) {
		mu.Lock()
		defer mu.Unlock()
		if rnd.Float64() < rate/4 {
			return nil, &smithy.GenericAPIError{Code: kinesisx.CodeInternalFailure, Message: "try again"}
		}
		refuse := map[int]string{}
		for i := range in {
			if rnd.Float64() < rate {
				refuse[i] = kinesisx.CodeProvisionedThroughputExceeded
			}
		}
		return refuse, nil
	}
}

func TestOrderedKeepsEachKeysOrderThroughPartialFailures(t *testing.T) {
	for _, tc := range []struct{ aggregate, singleWriter bool }{{false, false}, {true, false}, {false, true}, {true, true}} {
		aggregate := tc.aggregate
		t.Run(fmt.Sprintf("aggregation %v, single writer %v", aggregate, tc.singleWriter), func(t *testing.T) {
			api := &fakeAPI{shards: testShards(4), respond: flakyResponder(7, 0.2)}
			p := newTestProducer(api, func(c *Config) {
				c.Ordered = true
				c.SingleWriter = tc.singleWriter
				c.MaxInFlight = 8
				c.Backoff.MaxRetries = 100
				c.Aggregation = Aggregation{Enabled: aggregate, MaxBytes: 1024, MaxRecords: 20}
			})
			p.SetShardMap(testShardMap(t, 4))

			// Writes one after the other, as the output makes them in
			// ordered mode; each holds several records per key.
			const writes, per, keys = 10, 400, 40
			for w := range writes {
				require.Nil(t, p.Write(t.Context(), keyedEntries(w*per, per, keys)))
			}

			shards, recs := api.stream()
			view, err := producertest.KCLRead(shards, recs)
			require.NoError(t, err)
			assert.Zero(t, view.Dropped)
			assert.Len(t, view.Records, writes*per, "every record landed once")
			inv, err := producertest.Inversions(view.Records, seqOf)
			require.NoError(t, err)
			assert.Zero(t, inv, "per-key inversions")
			if aggregate {
				assert.Positive(t, view.Aggregates)
			}
			assert.LessOrEqual(t, api.maxSeen.Load(), int32(8), "within max_in_flight")
			// A single writer's writes never overlap: no key is booked
			// against a later write, and each write's rounds alone keep
			// the order above.
			assert.Equal(t, tc.singleWriter, p.order.last == nil, "the book of keys held by earlier writes is used only when writes may overlap")
		})
	}
}

func TestOrderedRequestsSpanShardsAndRunInParallel(t *testing.T) {
	t.Run("a write that fits one request is one request", func(t *testing.T) {
		api := &fakeAPI{shards: testShards(4)}
		p := newTestProducer(api, func(c *Config) { c.Ordered = true })
		p.SetShardMap(testShardMap(t, 4))
		require.Nil(t, p.Write(t.Context(), keyedEntries(0, 500, 500)))
		require.Len(t, api.calls, 1, "500 records of 500 keys over 4 shards")
		assert.Len(t, api.calls[0], 500)
	})
	t.Run("shards with a request each are written in parallel", func(t *testing.T) {
		api := &fakeAPI{shards: testShards(4), delay: 20 * time.Millisecond}
		p := newTestProducer(api, func(c *Config) { c.Ordered = true; c.MaxInFlight = 3 })
		p.SetShardMap(testShardMap(t, 4))
		require.Nil(t, p.Write(t.Context(), keyedEntries(0, 4000, 4000)))
		assert.Greater(t, api.maxSeen.Load(), int32(1), "requests in parallel")
		assert.LessOrEqual(t, api.maxSeen.Load(), int32(3), "within max_in_flight")
		for _, c := range api.calls {
			assert.LessOrEqual(t, len(c), kinesisx.MaxPutRecordsCount)
		}
	})
}

func TestOrderedRequestHoldsAKeyOnce(t *testing.T) {
	api := &fakeAPI{}
	p := newTestProducer(api, func(c *Config) { c.Ordered = true })
	require.Nil(t, p.Write(t.Context(), keyedEntries(0, 30, 3)))
	require.Len(t, api.calls, 10, "3 keys, 10 records each: ten requests of one record per key")
	for _, c := range api.calls {
		seen := map[string]bool{}
		for _, e := range c {
			assert.False(t, seen[aws.ToString(e.PartitionKey)], "key %s twice in one request", aws.ToString(e.PartitionKey))
			seen[aws.ToString(e.PartitionKey)] = true
		}
	}
}

func TestOrderedFailureFailsTheKeysLaterRecordsUnsent(t *testing.T) {
	// Every record of key-1 from sequence 4 on is refused for good; key-0
	// and key-2 land whole.
	api := &fakeAPI{respond: func(_ int, in []types.PutRecordsRequestEntry) (map[int]string, error) {
		refuse := map[int]string{}
		for i, e := range in {
			if string(e.Data) == "key-1/4" {
				refuse[i] = kinesisx.CodeProvisionedThroughputExceeded
			}
		}
		return refuse, nil
	}}
	p := newTestProducer(api, func(c *Config) { c.Ordered = true; c.Backoff.MaxRetries = 2 })
	in := keyedEntries(0, 30, 3)
	errs := p.Write(t.Context(), in)
	require.Len(t, errs, 30)
	for i, err := range errs {
		seq, key := i, in[i].PartitionKey
		switch {
		case key == "key-1" && seq == 4:
			var re *RecordError
			assert.ErrorAs(t, err, &re)
		case key == "key-1" && seq > 4:
			assert.ErrorIs(t, err, ErrEarlierRecordFailed, "record %d", i)
			assert.ErrorContains(t, err, "key-1")
		default:
			assert.NoError(t, err, "record %d", i)
		}
	}
	for _, c := range api.calls {
		for _, e := range c {
			n, err := seqOf(e.Data)
			require.NoError(t, err)
			assert.False(t, aws.ToString(e.PartitionKey) == "key-1" && n > 4, "%s was sent after an earlier record failed", e.Data)
		}
	}
}

// split returns the listing after shard 0 of testShards(2) split in two.
func splitShards() []types.Shard {
	shards := testShards(2)
	parent := shards[0]
	parent.SequenceNumberRange = &types.SequenceNumberRange{StartingSequenceNumber: aws.String("0"), EndingSequenceNumber: aws.String("1")}
	start, _ := parseHashKey(aws.ToString(parent.HashKeyRange.StartingHashKey))
	end, _ := parseHashKey(aws.ToString(parent.HashKeyRange.EndingHashKey))
	var mid, midNext hashKey
	mid[0], midNext[0] = 0x3F, 0x40
	for j := 1; j < 16; j++ {
		mid[j] = 0xFF
	}
	children := []types.Shard{
		{ShardId: aws.String("shardId-000000000002"), ParentShardId: parent.ShardId,
			HashKeyRange: &types.HashKeyRange{StartingHashKey: aws.String(start.decimal()), EndingHashKey: aws.String(mid.decimal())}},
		{ShardId: aws.String("shardId-000000000003"), ParentShardId: parent.ShardId,
			HashKeyRange: &types.HashKeyRange{StartingHashKey: aws.String(midNext.decimal()), EndingHashKey: aws.String(end.decimal())}},
	}
	return append([]types.Shard{parent, shards[1]}, children...)
}

func TestAggregatesAfterASplitAreSentAgainGroupedByTheNewShards(t *testing.T) {
	for _, ordered := range []bool{true, false} {
		t.Run(fmt.Sprintf("ordered %v", ordered), func(t *testing.T) {
			api := &fakeAPI{shards: testShards(2)}
			p := newTestProducer(api, func(c *Config) {
				c.Ordered = ordered
				c.MaxInFlight = 1 // so that unordered writes land in order too
				c.Aggregation = Aggregation{Enabled: true, MaxBytes: 4096, MaxRecords: 50}
			})
			p.SetShardMap(testShardMap(t, 2))

			require.Nil(t, p.Write(t.Context(), keyedEntries(0, 500, 40)))
			// The stream splits; the producer's map is now stale.
			api.reshard(splitShards())
			require.Nil(t, p.Write(t.Context(), keyedEntries(500, 500, 40)))
			shards, recs := api.stream()
			view, err := producertest.KCLRead(shards, recs)
			require.NoError(t, err)
			misplaced := view.Dropped
			assert.Positive(t, misplaced, "the stale map misplaced aggregates")
			if ordered {
				assert.Equal(t, 1, misplaced, "the stale shard's lane stops at its first misplaced aggregate")
			}
			assert.Equal(t, 3, p.shards.Load().Len(), "the map was refreshed")

			require.Nil(t, p.Write(t.Context(), keyedEntries(1000, 500, 40)))
			shards, recs = api.stream()
			view, err = producertest.KCLRead(shards, recs)
			require.NoError(t, err)
			t.Logf("aggregates %d, dropped by the KCL range rule (and sent again) %d", view.Aggregates, view.Dropped)
			assert.Equal(t, misplaced, view.Dropped, "none misplaced with the fresh map")
			seen := map[string]int{}
			for _, r := range view.Records {
				seen[string(r.Data)]++
			}
			assert.Len(t, seen, 1500, "no record lost")
			for d, n := range seen {
				assert.Equal(t, 1, n, "%s read once", d)
			}
			if ordered {
				inv, err := producertest.Inversions(view.Records, seqOf)
				require.NoError(t, err)
				assert.Zero(t, inv, "per-key inversions")
			}
		})
	}
}
