package testenv

import (
	"context"
	"fmt"
	"regexp"
	"sync"
	"sync/atomic"
	"testing"
)

// Starting kinesis-mock costs seconds of CPU; a package whose tests each
// start their own spends minutes on it. Tests that only create, write and
// read their own streams share one emulator per test binary instead: each
// names its streams with StreamName, so tests running in parallel never
// meet. The emulator is one single-threaded process serving every sharer,
// so light tests share it; a test that writes thousands of records, reads
// many shards, uses enhanced fan-out, or stops, restarts or corrupts the
// emulator, or counts every stream in it, starts its own with
// NewKinesisMock.

var (
	sharedMu    sync.Mutex
	sharedEmus  = map[string]*sharedEmulator{}
	streamCount atomic.Int64
)

type sharedEmulator struct {
	once sync.Once
	k    *Kinesis
	err  error
}

// SharedKinesisMock returns this test binary's one kinesis-mock, started by
// the first test that asks. It runs until CloseShared (call it from
// TestMain after m.Run) or, at the latest, until the test binary exits:
// its parent-death signal ends it then.
func SharedKinesisMock(tb testing.TB) *Kinesis { return SharedEmulator(tb, KindKinesisMock) }

// SharedKinesalite is SharedKinesisMock for kinesalite.
func SharedKinesalite(tb testing.TB) *Kinesis { return SharedEmulator(tb, KindKinesalite) }

// SharedEmulator returns this test binary's one emulator of the kind.
func SharedEmulator(tb testing.TB, kind string) *Kinesis {
	tb.Helper()
	sharedMu.Lock()
	s, ok := sharedEmus[kind]
	if !ok {
		s = &sharedEmulator{}
		sharedEmus[kind] = s
	}
	sharedMu.Unlock()
	// Not the test's context: the emulator outlives the test that started it.
	s.once.Do(func() { s.k, s.err = StartEmulator(context.Background(), kind) })
	Require(tb, "starting the shared "+kind, s.err)
	return s.k
}

// CloseShared stops the shared emulators. Call it from TestMain after m.Run.
func CloseShared() {
	sharedMu.Lock()
	defer sharedMu.Unlock()
	for kind, s := range sharedEmus {
		s.once.Do(func() {}) // a start still under way finishes first
		if s.k != nil {
			s.k.Close()
		}
		delete(sharedEmus, kind)
	}
}

var notInStreamName = regexp.MustCompile(`[^a-zA-Z0-9_.-]+`)

// StreamName returns a stream name unique in this test binary, made from
// the test's name so that an emulator's log points at the test.
func StreamName(tb testing.TB) string {
	n := streamCount.Add(1)
	base := notInStreamName.ReplaceAllString(tb.Name(), "-")
	if len(base) > 100 { // a stream name holds at most 128 characters
		base = base[len(base)-100:]
	}
	return fmt.Sprintf("%s-%d", base, n)
}
