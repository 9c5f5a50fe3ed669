package main

import (
	"fmt"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestIntegrationPausedInstanceDeliversNothingAfterWaking pauses one of two
// instances (SIGSTOP) for longer than lease.period, so the other takes its
// shards over and reads what is written meanwhile. When the paused one
// wakes (SIGCONT) it must deliver nothing from the leases it held before
// the pause: its readers are past their lease's local deadline and wait
// for a renewal, which finds the leases taken. It reads again only shards
// it takes afresh, and nothing is lost.
func TestIntegrationPausedInstanceDeliversNothingAfterWaking(t *testing.T) {
	t.Parallel()
	const stream = "zombie"
	k, r, store, dir := miSetup(t, stream, 4)
	client := k.Client()

	p := &producer{counter: map[string]int{}}
	insts := []*instance{startInstance(t, dir, "a", k, r, stream), startInstance(t, dir, "b", k, r, stream)}
	a, b := insts[0], insts[1]
	allDelivered := func(what string) {
		t.Helper()
		require.Eventually(t, func() bool {
			u, _, _ := check(deliveries(t, insts))
			return u == p.total()
		}, 60*time.Second, 200*time.Millisecond, "%s: not all %d records delivered", what, p.total())
	}
	balanced := func() bool {
		o := owners(t, store)
		return len(o) == 2 && allEqual(o, 2)
	}
	require.Eventually(t, balanced, 30*time.Second, 100*time.Millisecond, "shards not balanced 2/2: %v", func() string { return ownerSummary(owners(t, store)) })
	p.put(t, client, stream, 200)
	allDelivered("before the pause")

	// b is idle (everything delivered): pause it until a owns every shard,
	// and write while it sleeps.
	require.NoError(t, b.cmd.Process.Signal(syscall.SIGSTOP))
	paused := time.Now()
	t.Cleanup(func() { _ = b.cmd.Process.Signal(syscall.SIGCONT) })
	require.Eventually(t, func() bool {
		o := owners(t, store)
		return len(o) == 1 && allEqual(o, 4)
	}, 30*time.Second, 100*time.Millisecond, "a did not take b's shards: %v", func() string { return ownerSummary(owners(t, store)) })
	p.put(t, client, stream, 400)
	allDelivered("during the pause")
	// Let a commit what it delivered, so that nothing of it is read again
	// by whoever holds a shard next.
	time.Sleep(2 * miCommitPeriod)

	// Redis is held still for the first moments after b wakes: b cannot
	// learn from a renewal that its leases are gone (as when a renewal is
	// slow or late after a pause), so only its leases' local deadline can
	// keep it from reading and delivering what a already delivered.
	require.NoError(t, r.Pause())
	t.Cleanup(func() { _ = r.Resume() })
	woke := time.Now()
	require.NoError(t, b.cmd.Process.Signal(syscall.SIGCONT))
	time.Sleep(2 * time.Second)
	require.NoError(t, r.Resume())
	t.Logf("b paused %v (lease.period %v), Redis still for 2s after it woke", woke.Sub(paused).Round(time.Millisecond), miLeasePeriod)

	// b takes its share again through hand-offs; then more records.
	require.Eventually(t, balanced, 60*time.Second, 100*time.Millisecond, "not balanced again after b woke: %v", func() string { return ownerSummary(owners(t, store)) })
	p.put(t, client, stream, 200)
	allDelivered("after waking")

	evs := deliveries(t, insts)
	unique, dups, violations := check(evs)
	byA := map[string]bool{}
	for _, e := range evs {
		if e.Instance == a.name {
			byA[fmt.Sprintf("%s/%d", e.K, e.C)] = true
		}
	}
	afterWake, zombie := 0, 0
	for _, e := range evs {
		if e.Instance != b.name || e.At < woke.UnixNano() {
			continue
		}
		afterWake++
		if byA[fmt.Sprintf("%s/%d", e.K, e.C)] {
			zombie++
		}
	}
	t.Logf("written %d, unique %d, duplicates %d; b delivered %d after waking, %d of them also delivered by a", p.total(), unique, dups, afterWake, zombie)
	assert.Equal(t, p.total(), unique, "nothing lost")
	assert.Zero(t, zombie, "b delivered records of shards it no longer held after waking")
	assert.Positive(t, afterWake, "b reads again once it holds fresh leases")
	assert.Zero(t, violations, "per-key order of first deliveries")
}
