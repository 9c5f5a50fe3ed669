package producer

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/kinesis/types"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/connect-kinesis/connect-kinesis/internal/kinesisx"
	"github.com/connect-kinesis/connect-kinesis/internal/producer/producertest"
)

// Overlapping ordered writes, as the output makes them with max_in_flight
// batches: started in the reverse of their reserved order, through refused
// entries, 5xx answers and a split under them, every key's records land in
// the reserved order.
func TestOverlappingOrderedWritesKeepEachKeysOrder(t *testing.T) {
	t.Parallel()
	for _, aggregate := range []bool{false, true} {
		t.Run(fmt.Sprintf("aggregation %v", aggregate), func(t *testing.T) {
			t.Parallel()
			flaky := flakyResponder(5, 0.2)
			api := &fakeAPI{shards: testShards(2), delay: time.Millisecond}
			api.respond = func(call int, in []types.PutRecordsRequestEntry) (map[int]string, error) {
				if call == 15 {
					// Shard 0 splits (the fake's lock is held here).
					api.shards = splitShards()
				}
				return flaky(call, in)
			}
			p := newTestProducer(api, func(c *Config) {
				c.Ordered = true
				c.MaxInFlight = 8
				c.Backoff.MaxRetries = 100
				c.Aggregation = Aggregation{Enabled: aggregate, MaxBytes: 1024, MaxRecords: 20}
			})
			p.SetShardMap(testShardMap(t, 2))

			const writes, per, keys = 12, 300, 40
			places := make([]Reservation, writes)
			for w := range places {
				places[w] = p.Reserve()
			}
			var wg sync.WaitGroup
			for w := writes - 1; w >= 0; w-- {
				wg.Go(func() {
					assert.Nil(t, places[w].Write(t.Context(), keyedEntries(w*per, per, keys)), "write %d", w)
				})
			}
			wg.Wait()

			shards, recs := api.stream()
			view, err := producertest.KCLRead(shards, recs)
			require.NoError(t, err)
			seen := map[string]int{}
			for _, r := range view.Records {
				seen[string(r.Data)]++
			}
			assert.Len(t, seen, writes*per, "every record landed")
			for d, n := range seen {
				assert.Equal(t, 1, n, "%s read once", d)
			}
			inv, err := producertest.Inversions(view.Records, seqOf)
			require.NoError(t, err)
			assert.Zero(t, inv, "per-key inversions")
			if aggregate {
				assert.Equal(t, 3, p.shards.Load().Len(), "aggregates on the split shard refreshed the map")
				t.Logf("aggregates %d, dropped by the KCL range rule (and sent again) %d", view.Aggregates, view.Dropped)
			}
			assert.LessOrEqual(t, api.maxSeen.Load(), int32(8), "within max_in_flight")
		})
	}
}

// A later write's record of a key an earlier write holds is not sent
// before that write ends; its records of other keys go at once, so writes
// of different keys share round trips.
func TestOrderedWriteWaitsOnlyForTheKeysAnEarlierWriteHolds(t *testing.T) {
	t.Parallel()
	release := make(chan struct{})
	api := &fakeAPI{}
	api.respond = func(_ int, in []types.PutRecordsRequestEntry) (map[int]string, error) {
		if aws.ToString(in[0].PartitionKey) == "a" && string(in[0].Data) == "a/0" {
			api.mu.Unlock() // let other requests land while this one hangs
			<-release
			api.mu.Lock()
		}
		return nil, nil
	}
	p := newTestProducer(api, func(c *Config) { c.Ordered = true; c.MaxInFlight = 4 })

	first, second := p.Reserve(), p.Reserve()
	firstDone := make(chan []error, 1)
	go func() { firstDone <- first.Write(t.Context(), []Entry{{PartitionKey: "a", Data: []byte("a/0")}}) }()
	secondDone := make(chan []error, 1)
	go func() {
		secondDone <- second.Write(t.Context(), []Entry{{PartitionKey: "b", Data: []byte("b/1")}, {PartitionKey: "a", Data: []byte("a/2")}})
	}()

	landed := func(data string) bool {
		api.mu.Lock()
		defer api.mu.Unlock()
		for _, l := range api.landed {
			if string(l.entry.Data) == data {
				return true
			}
		}
		return false
	}
	assert.Eventually(t, func() bool { return landed("b/1") && api.callCount() == 2 }, 5*time.Second, time.Millisecond, "a key no earlier write holds goes at once")
	// a/2 must not be sent while a/0 hangs: give it every chance to.
	time.Sleep(50 * time.Millisecond)
	assert.Equal(t, 2, api.callCount(), "a/2 waits for the write holding a/0")
	close(release)
	assert.Nil(t, <-firstDone)
	assert.Nil(t, <-secondDone)
	api.mu.Lock()
	defer api.mu.Unlock()
	var order []string
	for _, l := range api.landed {
		order = append(order, string(l.entry.Data))
	}
	assert.Equal(t, []string{"b/1", "a/0", "a/2"}, order)
}

// A write whose context ends while it waits for an earlier write fails its
// waiting records with the context's error and sends nothing.
func TestOrderedWriteWaitingForAnEarlierOneEndsWithItsContext(t *testing.T) {
	t.Parallel()
	release := make(chan struct{})
	defer close(release)
	api := &fakeAPI{}
	api.respond = func(_ int, in []types.PutRecordsRequestEntry) (map[int]string, error) {
		if string(in[0].Data) == "a/0" {
			api.mu.Unlock()
			<-release
			api.mu.Lock()
		}
		return nil, nil
	}
	p := newTestProducer(api, func(c *Config) { c.Ordered = true })
	first, second := p.Reserve(), p.Reserve()
	go first.Write(t.Context(), []Entry{{PartitionKey: "a", Data: []byte("a/0")}})
	assert.Eventually(t, func() bool { return api.callCount() == 1 }, 5*time.Second, time.Millisecond)

	ctx, cancel := context.WithCancel(t.Context())
	cancel()
	errs := second.Write(ctx, []Entry{{PartitionKey: "a", Data: []byte("a/1")}})
	require.Len(t, errs, 1)
	assert.ErrorIs(t, errs[0], ctx.Err())
	assert.Equal(t, 1, api.callCount(), "a/1 was not sent")
}

// A record that fails for good fails, unsent, the records of its key in the
// writes that were in flight with it; a write that begins after it ended is
// not held back.
func TestOrderedFailureFailsTheKeyInOverlappingWrites(t *testing.T) {
	t.Parallel()
	release := make(chan struct{})
	api := &fakeAPI{}
	api.respond = func(_ int, in []types.PutRecordsRequestEntry) (map[int]string, error) {
		refuse := map[int]string{}
		for i, e := range in {
			if string(e.Data) == "a/0" {
				api.mu.Unlock() // hold the first write until the second is in
				<-release
				api.mu.Lock()
				refuse[i] = kinesisx.CodeProvisionedThroughputExceeded
			}
		}
		return refuse, nil
	}
	p := newTestProducer(api, func(c *Config) { c.Ordered = true; c.Backoff.MaxRetries = 1 })

	first, second := p.Reserve(), p.Reserve()
	firstDone := make(chan []error, 1)
	go func() { firstDone <- first.Write(t.Context(), []Entry{{PartitionKey: "a", Data: []byte("a/0")}}) }()
	secondDone := make(chan []error, 1)
	go func() {
		secondDone <- second.Write(t.Context(), []Entry{{PartitionKey: "a", Data: []byte("a/1")}, {PartitionKey: "b", Data: []byte("b/2")}})
	}()
	assert.Eventually(t, func() bool { return api.callCount() == 2 }, 5*time.Second, time.Millisecond, "a/0 in flight, b/2 sent")
	go func() {
		for {
			select {
			case release <- struct{}{}:
			case <-t.Context().Done():
				return
			}
		}
	}()

	errs := <-firstDone
	require.Len(t, errs, 1)
	var re *RecordError
	assert.ErrorAs(t, errs[0], &re, "a/0 refused for good")
	errs = <-secondDone
	require.Len(t, errs, 2)
	assert.ErrorIs(t, errs[0], ErrEarlierRecordFailed, "a/1 fails unsent")
	assert.ErrorAs(t, errs[0], &re, "with a/0's reason")
	assert.NoError(t, errs[1], "b/2 is written")

	// A write that begins after the failure is not held back.
	assert.Nil(t, p.Write(t.Context(), []Entry{{PartitionKey: "a", Data: []byte("a/3")}}))
	api.mu.Lock()
	defer api.mu.Unlock()
	var landed []string
	for _, l := range api.landed {
		landed = append(landed, string(l.entry.Data))
	}
	assert.Equal(t, []string{"b/2", "a/3"}, landed, "a/1 never sent")
}
