package chaos

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"time"
)

// redisFault restarts, empties, flushes, pauses or stalls Redis.
func (s *soak) redisFault(ctx context.Context, e soakEvent) error {
	s.faultBegin("")
	defer s.faultEnd("")
	from := time.Now()
	d := e.dur.Round(100 * time.Millisecond)

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
		if err := s.rc.FlushAll(ctx).Err(); err != nil {
			return fmt.Errorf("FLUSHALL: %w", err)
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
	s.mu.Lock()
	s.windows = append(s.windows, Window{What: e.class, From: from.Add(-2 * s.plan.CommitPeriod), To: time.Now().Add(s.plan.LeasePeriod)})
	s.mu.Unlock()
	// An instance stopped from two leases before a wipe to a lease after
	// it could not write back what it knew, nor could the shards it
	// released or left: they are read again from the group's start (the
	// design's stated cost), so every delivery before the wipe may come
	// again. Looked at once Redis is back and again a lease later.
	wipe, widened := e.class == ClassRedisEmpty || e.class == ClassRedisFlush, false
	widen := func() {
		if !wipe || widened || !s.stoppedSince(from.Add(-2*s.plan.LeasePeriod)) {
			return
		}
		widened = true
		s.mu.Lock()
		s.windows = append(s.windows, Window{What: e.class + " with an instance stopped", From: s.start, To: time.Now().Add(s.plan.LeasePeriod)})
		s.mu.Unlock()
		s.note("%s came as an instance stopped: every delivery so far may be delivered again", e.class)
	}
	widen()
	sleepCtx(ctx, s.plan.LeasePeriod)
	widen()
	return nil
}

// stoppedSince says whether the soak stopped an instance after t.
func (s *soak) stoppedSince(t time.Time) bool {
	s.smu.Lock()
	defer s.smu.Unlock()
	return s.lastStop.After(t)
}

func (s *soak) setWiped() {
	s.smu.Lock()
	s.wiped = true
	s.wipes++
	s.smu.Unlock()
}
