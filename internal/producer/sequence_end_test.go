package producer

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/service/kinesis/types"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/connect-kinesis/connect-kinesis/internal/kinesisx"
)

// Issue 38 item 1: a write that ends early must not hand its keys on before
// the write it waited for has ended.

// heldFirstWrite answers a/0 first with a throttle, then holds its retry
// until release is closed, so that a/0 is in flight, being retried, while
// later writes begin.
func heldFirstWrite(t *testing.T) (*fakeAPI, chan struct{}) {
	release := make(chan struct{})
	api := &fakeAPI{}
	attempts := 0
	api.respond = func(_ int, in []types.PutRecordsRequestEntry) (map[int]string, error) {
		for i, e := range in {
			if string(e.Data) != "a/0" {
				continue
			}
			attempts++
			if attempts == 1 {
				return map[int]string{i: kinesisx.CodeProvisionedThroughputExceeded}, nil
			}
			api.mu.Unlock()
			<-release
			api.mu.Lock()
		}
		return nil, nil
	}
	return api, release
}

func landedData(api *fakeAPI) []string {
	api.mu.Lock()
	defer api.mu.Unlock()
	var order []string
	for _, l := range api.landed {
		order = append(order, string(l.entry.Data))
	}
	return order
}

// Batch N's a/0 is being retried; batch N+1's only record of a fails
// validation, so its write ends at once; batch N+2's a/2 must still wait
// for a/0. Before the fix a/2 found the key free: landed [a/2 a/0].
func TestOrderedWriteEndingOnAnInvalidRecordKeepsTheKeyHeld(t *testing.T) {
	t.Parallel()
	for name, bad := range map[string]Entry{
		"over max_record_size": {PartitionKey: "a", Data: []byte(strings.Repeat("x", 2000))},
		"bad hash_key":         {PartitionKey: "a", Data: []byte("a/1"), ExplicitHashKey: "-1"},
	} {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			api, release := heldFirstWrite(t)
			p := newTestProducer(api, func(c *Config) { c.Ordered = true; c.MaxInFlight = 4; c.MaxRecordSize = 1000 })
			first, second, third := p.Reserve(), p.Reserve(), p.Reserve()
			firstDone := make(chan []error, 1)
			go func() { firstDone <- first.Write(t.Context(), []Entry{{PartitionKey: "a", Data: []byte("a/0")}}) }()
			require.Eventually(t, func() bool { return api.callCount() == 2 }, 5*time.Second, time.Millisecond, "a/0 retried after a throttle")

			errs := second.Write(t.Context(), []Entry{bad})
			require.Len(t, errs, 1)
			assert.Error(t, errs[0], "the invalid record fails alone")

			thirdDone := make(chan []error, 1)
			go func() { thirdDone <- third.Write(t.Context(), []Entry{{PartitionKey: "a", Data: []byte("a/2")}}) }()
			time.Sleep(50 * time.Millisecond) // every chance for a/2 to overtake
			close(release)
			assert.Nil(t, <-firstDone)
			assert.Nil(t, <-thirdDone)
			assert.Equal(t, []string{"a/0", "a/2"}, landedData(api), "landed")
		})
	}
}

// A middle write whose context ends while it waits for the first fails its
// record with the context's error. A third write already waiting behind it
// then fails its record of the key unsent (a replay of a/1 must come before
// it); a third write that begins after the middle one ended waits for a/0.
// Before the fix a/2 was sent at once in both cases and landed before a/0.
func TestOrderedWriteEndingWithItsContextKeepsTheKeyInOrder(t *testing.T) {
	t.Parallel()
	for _, thirdWaiting := range []bool{true, false} {
		t.Run(fmt.Sprintf("third already waiting %v", thirdWaiting), func(t *testing.T) {
			t.Parallel()
			api, release := heldFirstWrite(t)
			p := newTestProducer(api, func(c *Config) { c.Ordered = true; c.MaxInFlight = 4 })
			first, second, third := p.Reserve(), p.Reserve(), p.Reserve()
			firstDone := make(chan []error, 1)
			go func() { firstDone <- first.Write(t.Context(), []Entry{{PartitionKey: "a", Data: []byte("a/0")}}) }()
			require.Eventually(t, func() bool { return api.callCount() == 2 }, 5*time.Second, time.Millisecond)

			ctx, cancel := context.WithCancel(t.Context())
			secondDone := make(chan []error, 1)
			go func() { secondDone <- second.Write(ctx, []Entry{{PartitionKey: "a", Data: []byte("a/1")}}) }()
			thirdDone := make(chan []error, 1)
			startThird := func() {
				go func() { thirdDone <- third.Write(t.Context(), []Entry{{PartitionKey: "a", Data: []byte("a/2")}}) }()
			}
			if thirdWaiting {
				startThird()
				require.Eventually(t, func() bool { return third.s.hasEntered() }, 5*time.Second, time.Millisecond)
			}
			time.Sleep(20 * time.Millisecond) // let them wait for the first
			cancel()
			errs := <-secondDone
			require.Len(t, errs, 1)
			assert.ErrorIs(t, errs[0], context.Canceled)
			if !thirdWaiting {
				startThird()
			}
			time.Sleep(50 * time.Millisecond) // every chance for a/2 to overtake
			close(release)
			assert.Nil(t, <-firstDone)
			errs = <-thirdDone
			if !thirdWaiting {
				assert.Nil(t, errs)
				assert.Equal(t, []string{"a/0", "a/2"}, landedData(api), "landed")
				return
			}
			require.Len(t, errs, 1)
			assert.ErrorIs(t, errs[0], ErrEarlierRecordFailed, "a/2 fails unsent behind a/1")
			assert.ErrorIs(t, errs[0], context.Canceled, "with a/1's reason")
			assert.Equal(t, []string{"a/0"}, landedData(api), "landed")
		})
	}
}

// A write that ends without having resolved the earlier write it waited on
// for a key, and without failing the key, passes that write on: a later
// write waits for it.
func TestOrderedWriteEndingEarlyPassesItsPredecessorOn(t *testing.T) {
	t.Parallel()
	p := newTestProducer(&fakeAPI{}, func(c *Config) { c.Ordered = true })
	first, second, third := p.Reserve(), p.Reserve(), p.Reserve()
	a := []Entry{{PartitionKey: "a", Data: []byte("x")}}
	first.s.holdKeys(a, []int{0})
	second.s.holdKeys(a, []int{0})
	second.s.end() // ends without ever waiting for the first
	third.s.holdKeys(a, []int{0})
	wait, failed := third.s.waitingFor("a")
	assert.NoError(t, failed)
	assert.NotNil(t, wait, "the third write waits for the first")
	first.s.end()
	wait, failed = third.s.waitingFor("a")
	assert.Nil(t, wait)
	assert.NoError(t, failed)
	third.s.end()
	assert.Empty(t, p.order.last, "no key left held")
}

// hasEntered reports whether the write has entered its keys.
func (s *sequenced) hasEntered() bool {
	select {
	case <-s.entered:
		return true
	default:
		return false
	}
}

// Defect 3 of the store's and producer's edges: a record that fails while
// its write waits for a request slot (its context ends) must leave its key
// failed, as one that fails in flight does. With MaxInFlight 1, x/0 holds
// the only slot; the middle write's a/1 waits for it and its context ends;
// the third write, waiting behind the middle one on key a, must fail a/2
// unsent (a replay of a/1 comes first). Before the fix a/2 was sent:
// landed [x/0 a/2].
func TestOrderedRecordFailedWaitingForASlotKeepsItsKeyFailed(t *testing.T) {
	t.Parallel()
	release := make(chan struct{})
	api := &fakeAPI{}
	api.respond = func(_ int, in []types.PutRecordsRequestEntry) (map[int]string, error) {
		for _, e := range in {
			if string(e.Data) == "x/0" {
				api.mu.Unlock()
				<-release
				api.mu.Lock()
			}
		}
		return nil, nil
	}
	p := newTestProducer(api, func(c *Config) { c.Ordered = true; c.MaxInFlight = 1 })
	first, second, third := p.Reserve(), p.Reserve(), p.Reserve()
	firstDone := make(chan []error, 1)
	go func() { firstDone <- first.Write(t.Context(), []Entry{{PartitionKey: "x", Data: []byte("x/0")}}) }()
	require.Eventually(t, func() bool { return api.callCount() == 1 }, 5*time.Second, time.Millisecond, "x/0 holds the only slot")

	ctx, cancel := context.WithCancel(t.Context())
	secondDone := make(chan []error, 1)
	go func() { secondDone <- second.Write(ctx, []Entry{{PartitionKey: "a", Data: []byte("a/1")}}) }()
	require.Eventually(t, func() bool { return second.s.hasEntered() }, 5*time.Second, time.Millisecond)
	thirdDone := make(chan []error, 1)
	go func() { thirdDone <- third.Write(t.Context(), []Entry{{PartitionKey: "a", Data: []byte("a/2")}}) }()
	require.Eventually(t, func() bool { return third.s.hasEntered() }, 5*time.Second, time.Millisecond)
	time.Sleep(20 * time.Millisecond) // a/1 waits for the slot
	cancel()
	errs := <-secondDone
	require.Len(t, errs, 1)
	assert.ErrorIs(t, errs[0], context.Canceled)
	time.Sleep(50 * time.Millisecond) // every chance for a/2 to overtake
	close(release)
	assert.Nil(t, <-firstDone)
	errs = <-thirdDone
	assert.Equal(t, []string{"x/0"}, landedData(api), "landed")
	require.Len(t, errs, 1)
	assert.ErrorIs(t, errs[0], ErrEarlierRecordFailed, "a/2 fails unsent behind a/1")
	assert.ErrorIs(t, errs[0], context.Canceled, "with a/1's reason")
}
