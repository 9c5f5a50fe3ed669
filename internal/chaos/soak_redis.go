package chaos

import (
	"context"
	"os"
	"path/filepath"
	"time"
)

// redisFault restarts, empties, flushes, pauses or stalls Redis.
func (s *soak) redisFault(ctx context.Context, e soakEvent) error {
	s.redisMu.Lock()
	defer s.redisMu.Unlock()
	s.faultBegin("")
	defer s.faultEnd("")
	from := time.Now()
	held := s.withholdBegin(e.class, "")
	defer s.withholdEnd(held)
	d := e.dur.Round(100 * time.Millisecond)
	wipe := e.class == ClassRedisEmpty || e.class == ClassRedisFlush
	var holders map[string]int
	var live map[int]bool
	if wipe {
		// Who holds what, just before the store forgets it.
		holders, live = s.holdersBeforeWipe(ctx), s.liveUnpausedPids()
		s.recordHolders(e.class, holders, live)
	}

	switch e.class {
	case ClassRedisRestart:
		s.note("redis restart (keeps its data), down %v", d)
		s.red.Stop()
		sleepCtx(ctx, e.dur)
		if err := s.red.Start(ctx); err != nil {
			return err
		}
	case ClassRedisEmpty:
		s.note("redis down %v, back empty", d)
		s.red.Stop()
		for _, f := range []string{"appendonlydir", "appendonly.aof", "dump.rdb"} {
			if err := os.RemoveAll(filepath.Join(s.red.Dir, f)); err != nil {
				return err
			}
		}
		sleepCtx(ctx, e.dur)
		if err := s.red.Start(ctx); err != nil {
			return err
		}
		s.setWiped()
	case ClassRedisFlush:
		s.note("redis FLUSHALL")
		if err := flushPaused(ctx, s.rc); err != nil {
			return err
		}
		s.setWiped()
	case ClassRedisPause, ClassRedisStall:
		s.note("%s: SIGSTOP for %v", e.class, d)
		if err := s.red.Pause(); err != nil {
			return err
		}
		sleepCtx(ctx, e.dur)
		if err := s.red.Resume(); err != nil {
			return err
		}
	}
	s.note("redis back (%s)", e.class)
	s.withholdEnd(held)
	// A wipe (FLUSHALL, or Redis back empty after an outage past the
	// lease) allows no duplicate of a shard a live instance held: the
	// holder writes back where it is, and stopped delivering when its
	// lease's local deadline passed; the shards no live holder could write
	// back get windows of their own below. A restart that keeps the data,
	// a pause or a stall lets leases lapse: each holder's deliveries since
	// its last commit may come again.
	s.mu.Lock()
	s.windows = append(s.windows, Window{What: e.class, Kind: e.class, NoDups: wipe,
		From: from.Add(-2 * s.plan.CommitPeriod), To: time.Now().Add(s.plan.LeasePeriod)})
	s.mu.Unlock()
	if !wipe {
		return nil
	}
	// soak_wipe.go: the shards no live, running instance held at the wipe,
	// then those whose holder stopped, was paused or was cut off from
	// Redis from the wipe's start to a lease after it.
	s.widenForWipe(e.class+" of shards no live instance held", e.class+", no live holder (start position)", from, unheldShards(holders, live))
	sleepCtx(ctx, s.plan.LeasePeriod)
	s.widenForWipe(e.class+" of shards whose holder stopped or was out of reach after it", e.class+", holder lost after it (start position)", from, lostHolders(holders, live, s.liveUnpausedPids(), s.outSince(from)))
	return nil
}

func (s *soak) setWiped() {
	s.smu.Lock()
	s.wiped = true
	s.wipes++
	s.smu.Unlock()
}
