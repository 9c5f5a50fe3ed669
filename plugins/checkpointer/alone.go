package checkpointer

import "sync"

// onTheirOwn starts call for each stream index in alone, each in its own
// goroutine, and returns a wait for them all. The batched calls
// (RenewStreams, HeartbeatAll, PublishProgressAll, CheckGroups,
// ReadRounds) cover the
// streams one script can: in a Cluster a script touches one slot, and a
// store of another kind has calls of its own, so those streams each make
// their own call. They share the caller's bound (a sixth of the lease for
// a renewal); made one after another, one slow node or stalled call would
// push every stream after it past that bound, so they are made at once.
func onTheirOwn(alone []int, call func(i int)) (wait func()) {
	var wg sync.WaitGroup
	for _, i := range alone {
		wg.Go(func() { call(i) })
	}
	return wg.Wait
}
