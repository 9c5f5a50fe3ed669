package coordinator

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/failsafe-go/failsafe-go"

	"github.com/connect-kinesis/connect-kinesis/internal/consumer/reader"
	"github.com/connect-kinesis/connect-kinesis/internal/kinesisx"
)

// How an instance stops: every reader stops fetching, waits for its
// in-flight batches (up to lease.handoff_timeout), commits and releases its
// lease, then the instance leaves the group; one line says how it went.

// Close stops fetching, waits (within ctx) for in-flight batches to be
// acked, commits, releases every lease and leaves the group, so another
// instance takes the shards over at once. It logs once what it handed
// off and how long it took: at INFO when every shard was committed and
// released with nothing left unacknowledged, at WARN otherwise.
func (c *Consumer) Close(ctx context.Context) error {
	began := time.Now()
	c.mu.Lock()
	coords := c.coords
	c.coords, c.followed, c.closed = nil, nil, true
	removing := awaitedRemovals(c.removing)
	c.mu.Unlock()
	// A stream being removed (follow.go) is stopping already: its
	// readers wait for their in-flight batches as the others' are about
	// to. It ends by this stop's deadline too, and before the run context
	// is cancelled below, which would end its readers without a release.
	// Its readers are ended when the other streams' are, marksReserve
	// before the deadline, so that it too writes back the marks of the
	// leases it leaves to lapse.
	readersEnd, endReaders := beforeTheEnd(ctx)
	defer endReaders()
	for _, rm := range removing {
		cut := context.AfterFunc(readersEnd, rm.cutReaders)
		defer cut()
		stop := context.AfterFunc(ctx, rm.cancel)
		defer stop()
	}
	tallies := make([]stopTally, len(coords))
	var wg sync.WaitGroup
	for i, co := range coords {
		wg.Add(1)
		go func() {
			defer wg.Done()
			tallies[i] = co.shutdown(ctx)
		}()
	}
	wg.Wait()
	for _, rm := range removing {
		select {
		case <-rm.done:
		case <-ctx.Done():
		}
	}
	if coords != nil {
		c.logStop(tallies, time.Since(began))
		c.metrics.Streams.Set(0)
	}
	if c.cancel != nil {
		c.cancel()
	}
	done := make(chan struct{})
	go func() { c.wg.Wait(); close(done) }()
	select {
	case <-done:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// stopTally is how the readers of one stream ended at shutdown.
type stopTally struct {
	// released counts the shards committed and released (or closed).
	released int
	// unreleased names the shards whose final commit did not land (or
	// that shutdown's time cut short): their leases lapse.
	unreleased []string
	// unacked names the shards handed back with records past the
	// committed checkpoint; unackedRecords counts those records.
	unacked        []string
	unackedRecords int
	// unackedBy splits them by why the hand-back left them.
	unackedBy [reader.UnackedEnded + 1]unackedGroup
	// lost counts the readers whose lease was lost: nothing to hand off.
	lost int
}

// shutdown stops the run loop, then every reader gracefully: they stop
// fetching, wait for acks, commit and release. Leases are renewed until the
// last reader is done, so a slow drain never loses its lease and has its
// final commit refused. Past ctx, readers are ended. It reports how each
// reader ended.
func (co *coordinator) shutdown(ctx context.Context) stopTally {
	return co.shutdownCut(ctx, ctx)
}

// shutdownCut is shutdown whose readers are also ended when cut ends: a
// removal that a Close bounds by its own time (follow.go, Close), the
// rest of ctx left for keepMarks.
func (co *coordinator) shutdownCut(ctx, cut context.Context) stopTally {
	var tally stopTally
	co.stopOnce.Do(func() { close(co.stopReq) })
	select {
	case <-co.runDone:
	case <-ctx.Done():
		// The run loop did not end in time (a step still waits on Kinesis
		// or Redis): it is cancelled with its readers, whose leases lapse.
		// Left running, it would go on after the stop returned, and a
		// take it finished then would read the shard beside whatever
		// reads the stream next (soak seed 5: a stream deleted and
		// created again was read twice by one instance).
		co.giveUpOnce.Do(func() { close(co.giveUp) })
		for id := range co.readersNow() {
			tally.unreleased = append(tally.unreleased, co.streamName+"/"+id)
		}
		return tally
	}
	for _, r := range co.readers {
		r.Stop()
	}
	readersCtx, cancel := beforeTheEnd(ctx)
	defer cancel()
	defer context.AfterFunc(cut, cancel)()
	for _, r := range co.readers {
		select {
		case <-r.Done():
			tally.add(co.streamName, r)
		case <-readersCtx.Done():
			r.Cancel()
			tally.unreleased = append(tally.unreleased, co.streamName+"/"+r.Shard().ID)
		}
	}
	co.keepMarks(ctx, tally.unreleased)
	close(co.renewStop)
	select {
	case <-co.renewDone:
	case <-ctx.Done():
	}
	co.c.metrics.Owned.Set(0, co.streamName)
	if err := co.store.RemoveMember(ctx, co.c.owner); err != nil {
		co.log.Debugf("Leaving the group failed; the member entry expires by itself: %v", err)
	}
	co.cancelRun()
	return tally
}

// marksReserve is the end of the stop's time kept for keepMarks: readers
// still retrying their final commit are ended that much before the stop's
// deadline, so the write-back of marks for the shards they leave to lapse
// still has time to land (a quarter of what is left, when that is less).
const marksReserve = time.Second

// beforeTheEnd returns a context that ends marksReserve before ctx's
// deadline (or with ctx, when it has none). Without it, a final commit
// retried to the end of the stop left keepMarks an expired context, and
// the marks were never written back (soak seed 10 with efo: y2).
func beforeTheEnd(ctx context.Context) (context.Context, context.CancelFunc) {
	deadline, ok := ctx.Deadline()
	if !ok {
		return context.WithCancel(ctx)
	}
	reserve := min(marksReserve, time.Until(deadline)/4)
	return context.WithDeadline(ctx, deadline.Add(-reserve))
}

// keepMarks writes the stream's redelivery marks back when the stop leaves
// leases to lapse (unreleased: their final commit or release did not
// land), retried until one write lands or the stop's time is up. Those
// shards' next owners read again what this instance delivered, and mark
// it only if the store still has the marks. While this stream's readers
// run, its renewals re-seed a store that forgot, marks included; once the
// last one ended, nothing here does, and the instances still running
// re-seed only the marks they know. A reader already handing its shard off
// when the stop came gives up after lease.handoff_timeout, well before the
// stop's time is up: without this write, a Redis that came back empty
// after that lost the marks, and the records this instance delivered were
// read again unmarked (soak seed 9 with efo: y2 stopped while Redis was
// down, Redis came back empty 5 s later, and a12 delivered soak-kpl's
// shard 5 again unmarked). A store that kept its marks takes the write as
// a no-op; a store that forgets after the last write cannot be helped by
// an instance that is gone.
func (co *coordinator) keepMarks(ctx context.Context, unreleased []string) {
	if len(unreleased) == 0 || co.rs == nil || co.rs.Marker == nil {
		return
	}
	b := co.c.cfg.Backoff
	b.MaxRetries, b.MaxElapsedTime = 0, 0
	// At least once a second: the marks must land before the leases lapse
	// (lease.period after a store that forgot answers again).
	b.MaxInterval = min(b.MaxInterval, time.Second)
	b.InitialInterval = min(b.InitialInterval, b.MaxInterval)
	retry := kinesisx.RetryBuilder[any](b).HandleIf(func(_ any, err error) bool { return err != nil }).Build()
	err := failsafe.With(retry).WithContext(ctx).Run(func() error { return co.rs.Marker.WriteBack(ctx) })
	if err != nil {
		co.log.Warnf("Could not write back how far this instance delivered the shards it left to lapse (%s) before the stop's time was up; if the checkpoint store forgot the group, their next owners deliver those records again without kinesis_redelivered: %v",
			strings.Join(unreleased, ", "), err)
		return
	}
	co.log.Debugf("Wrote back how far this instance delivered the stream's shards, for the %d it left to lapse", len(unreleased))
}

// add counts how a finished reader ended.
func (t *stopTally) add(stream string, r shardReader) {
	name := stream + "/" + r.Shard().ID
	switch {
	case r.Lost():
		t.lost++
		return
	case r.Outcome().Released || r.Outcome().ClosedShard:
		t.released++
	default:
		t.unreleased = append(t.unreleased, name)
	}
	if r.Outcome().Unacked > 0 {
		t.unacked = append(t.unacked, name)
		t.unackedRecords += r.Outcome().Unacked
		g := &t.unackedBy[r.Outcome().UnackedCause]
		g.shards = append(g.shards, name)
		g.records += r.Outcome().Unacked
	}
}

// logStop says in one line how the stop went.
func (c *Consumer) logStop(tallies []stopTally, took time.Duration) {
	var all stopTally
	for _, t := range tallies {
		all.released += t.released
		all.lost += t.lost
		all.unreleased = append(all.unreleased, t.unreleased...)
		all.unacked = append(all.unacked, t.unacked...)
		all.unackedRecords += t.unackedRecords
		for i := range t.unackedBy {
			all.unackedBy[i].shards = append(all.unackedBy[i].shards, t.unackedBy[i].shards...)
			all.unackedBy[i].records += t.unackedBy[i].records
		}
	}
	took = took.Round(time.Millisecond)
	if len(all.unreleased) == 0 && len(all.unacked) == 0 {
		c.log.Infof("Stopped reading: committed and released %d shards in %v", all.released, took)
		return
	}
	parts := []string{fmt.Sprintf("Stopped reading in %v: committed and released %d of %d shards", took, all.released, all.released+len(all.unreleased))}
	parts = append(parts, all.unackedParts(c.cfg.HandoffTimeout)...)
	if len(all.unreleased) > 0 {
		parts = append(parts, fmt.Sprintf("%s could not commit the final checkpoint: their leases lapse after lease.period, and their next owners deliver again the records acked since the last commit", shardList(all.unreleased)))
	}
	c.log.Warn(strings.Join(parts, "; "))
}

// unackedGroup is the shards a hand-back left with records unacknowledged
// for one cause, and how many records.
type unackedGroup struct {
	shards  []string
	records int
}

// unackedParts says, one part per cause, which records the hand-backs left
// past the committed checkpoints and why: a stop that gave up on a nacked
// batch at once must not say it waited lease.handoff_timeout.
func (t *stopTally) unackedParts(handoff time.Duration) []string {
	var parts []string
	for cause, g := range t.unackedBy {
		if len(g.shards) == 0 {
			continue
		}
		var why string
		switch reader.UnackedCause(cause) {
		case reader.UnackedNacked:
			why = "were nacked, or come after a nacked record, and a stopping input does not deliver them again"
		case reader.UnackedEnded:
			why = "were not acknowledged before the stop's time was up, or come after one that was not"
		default:
			why = fmt.Sprintf("were not acknowledged within lease.handoff_timeout (%v), or come after one that was not", handoff)
		}
		parts = append(parts, fmt.Sprintf("%d records past the committed checkpoints of %s %s: the shards' next owners deliver them again", g.records, shardList(g.shards), why))
	}
	return parts
}

// shardList names shards (stream/shard), at most ten of them.
func shardList(names []string) string {
	slices.Sort(names)
	const most = 10
	if len(names) > most {
		return fmt.Sprintf("%d shards (%s and %d more)", len(names), strings.Join(names[:most], ", "), len(names)-most)
	}
	if len(names) == 1 {
		return "shard " + names[0]
	}
	return fmt.Sprintf("%d shards (%s)", len(names), strings.Join(names, ", "))
}
