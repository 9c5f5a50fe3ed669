package chaos

import (
	"context"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/connect-kinesis/connect-kinesis/internal/consumer"
	"github.com/connect-kinesis/connect-kinesis/internal/faultproxy"
	"github.com/connect-kinesis/connect-kinesis/internal/kinesisx"
)

// sleepCtx waits d or until ctx ends.
func sleepCtx(ctx context.Context, d time.Duration) {
	select {
	case <-time.After(d):
	case <-ctx.Done():
	}
}

// do carries out one drawn fault, from its start to its end.
func (s *soak) do(ctx context.Context, e soakEvent) error {
	lease := s.plan.LeasePeriod
	switch e.class {
	case ClassKill, ClassTerm, ClassPause, ClassRedisCut:
		return s.instanceFault(ctx, e)
	case ClassScale:
		name := extraNames[e.target%len(extraNames)]
		if s.live(name) != nil {
			return nil
		}
		s.faultBegin("")
		err := s.startInstance(name)
		sleepCtx(ctx, lease+s.plan.Rebalance)
		s.faultEnd("")
		if err != nil {
			return err
		}
		sleepCtx(ctx, e.dur)
		s.faultBegin("")
		defer s.faultEnd("")
		if in := s.stopInstance(name, syscall.SIGTERM); in != nil {
			s.note("scale-in: %s stopped (SIGTERM) after %v", in.name, e.dur.Round(100*time.Millisecond))
		}
		sleepCtx(ctx, lease+s.plan.Rebalance)
		return nil
	case ClassKinesis:
		s.faultBegin("")
		defer s.faultEnd("")
		s.setStorm(true)
		s.note("kinesis storm for %v: 50%% throttled, 10%% 5xx, 20%% expired iterators", e.dur.Round(100*time.Millisecond))
		sleepCtx(ctx, e.dur)
		s.setStorm(false)
		s.note("kinesis storm ends")
		return nil
	case ClassDeny:
		return s.deny(ctx, e)
	case ClassReshard:
		return s.reshard(ctx, e)
	case ClassStreams:
		return s.streamsFault(ctx, e)
	case ClassEFO:
		// Every subscription is renewed from after its last delivered
		// record: nothing is read again, and the readers subscribe again
		// within seconds, which liveness judges from here.
		s.faultBegin("")
		n := s.cutter.Cut()
		s.cuts.Add(int64(n))
		s.note("efo: cut %d connections of the fan-out readers (%s)", n, strings.Join(s.fanOutReaders(), ", "))
		s.faultEnd("")
		return nil
	case ClassFailoverAcked, ClassFailoverUnacked, ClassFailoverSentinelAcked, ClassFailoverSentinelUnacked,
		ClassFailoverClusterAcked, ClassFailoverClusterUnacked:
		return s.failover(ctx, e)
	}
	return s.redisFault(ctx, e)
}

// instanceFault kills, stops or pauses one of the base instances.
func (s *soak) instanceFault(ctx context.Context, e soakEvent) error {
	names := s.baseNames()
	name := names[e.target%len(names)]
	in := s.live(name)
	s.smu.Lock()
	busy := s.busy[name]
	if in != nil && !busy {
		s.busy[name] = true
	}
	s.smu.Unlock()
	if in == nil || busy {
		s.note("%s %s: not running or under another fault, skipped", e.class, name)
		return nil
	}
	defer func() {
		s.smu.Lock()
		delete(s.busy, name)
		s.smu.Unlock()
	}()
	s.faultBegin("")
	defer s.faultEnd("")
	owned, complete := s.ownedBy(ctx, in)
	// A window names the shards held only when every stream's leases were
	// read: a stream missed would leave its shards out of every window.
	scope := owned
	if !complete {
		scope = nil
	}
	now := time.Now()
	switch e.class {
	case ClassKill:
		since, read := s.checkpointsOf(ctx, scope)
		s.stopInstance(name, syscall.SIGKILL)
		dead := time.Now()
		s.mu.Lock()
		s.kills = append(s.kills, Kill{Inst: in.name, At: now, Shards: owned})
		s.windows = append(s.windows, killedWindow(s.plan, s.start, now, dead, in.name, scope, since, read))
		s.mu.Unlock()
		s.note("kill %s (SIGKILL; held %v), start again in %v", in.name, owned, e.dur.Round(100*time.Millisecond))
	case ClassTerm:
		s.note("term %s (SIGTERM; held %v), start again in %v", in.name, owned, e.dur.Round(100*time.Millisecond))
		s.stopInstance(name, syscall.SIGTERM)
		s.note("%s ended after SIGTERM in %v", in.name, time.Since(now).Round(100*time.Millisecond))
	case ClassPause:
		s.note("pause %s (SIGSTOP for %v, %.1f leases; held %v)", in.name, e.dur.Round(100*time.Millisecond), e.dur.Seconds()/s.plan.LeasePeriod.Seconds(), owned)
		s.smu.Lock()
		s.paused[in.cmd.Process.Pid] = true
		s.smu.Unlock()
		s.outage(in.cmd.Process.Pid, true)
		held := s.withholdBegin("pause "+in.name, in.name)
		_ = in.cmd.Process.Signal(syscall.SIGSTOP)
		sleepCtx(ctx, e.dur)
		_ = in.cmd.Process.Signal(syscall.SIGCONT)
		s.withholdEnd(held)
		s.smu.Lock()
		delete(s.paused, in.cmd.Process.Pid)
		s.smu.Unlock()
		s.outage(in.cmd.Process.Pid, false)
		// Past its lease the paused instance's shards were taken: what it
		// delivered since its last commit is read again, and a batch it had
		// in hand may still reach its output after SIGCONT.
		s.mu.Lock()
		s.windows = append(s.windows, faultWindow(s.plan, "pause "+in.name, "pause", now, time.Now(), scope))
		s.mu.Unlock()
		s.note("resume %s (SIGCONT)", in.name)
		sleepCtx(ctx, s.plan.LeasePeriod)
		return nil
	case ClassRedisCut:
		cut := s.redisCut(name)
		if cut == nil {
			return nil
		}
		s.note("cut %s off from Redis (every byte held %v, %.1f leases; held %v)", in.name, e.dur.Round(100*time.Millisecond), e.dur.Seconds()/s.plan.LeasePeriod.Seconds(), owned)
		s.outage(in.cmd.Process.Pid, true)
		held := s.withholdBegin("redis-cut "+in.name, in.name)
		cut.Hold()
		sleepCtx(ctx, e.dur)
		cut.Release()
		s.withholdEnd(held)
		s.outage(in.cmd.Process.Pid, false)
		// Past its lease the instance's shards were taken, as after a
		// pause; its renewals and commits arrive late and are fenced.
		s.mu.Lock()
		s.windows = append(s.windows, faultWindow(s.plan, "redis-cut "+in.name, "redis-cut", now, time.Now(), scope))
		s.mu.Unlock()
		s.note("%s reaches Redis again (the held bytes delivered)", in.name)
		sleepCtx(ctx, s.plan.LeasePeriod)
		return nil
	}
	sleepCtx(ctx, e.dur)
	return s.startInstance(name)
}

// faultWindow is the window of a pause or a Redis cut-off of an instance
// from at until back: its deliveries since its last commit (a lease
// before at) are read again by its shards' next owners, and a batch it had
// in hand may still reach its output once back (a lease after it). Only
// the shards it held (owned) are read again; the first delivery of a
// duplicate may be either's, so the window names no instance. Without
// them (the leases could not be read) every shard stands for them.
func faultWindow(p Plan, what, kind string, at, back time.Time, owned []string) Window {
	w := Window{What: what, Kind: kind, From: at.Add(-killWindow(p)), To: back.Add(p.LeasePeriod)}
	if len(owned) > 0 {
		w.Shards = map[string]bool{}
		for _, id := range owned {
			w.Shards[id] = true
		}
	}
	return w
}

// killedWindow is the window of a kill of inst decided at now (its leases
// and checkpoints are read then) and dead at dead: what inst delivered
// since its last commit plus what it had in flight, the design's bound.
// The window runs until dead, not now: reading the leases and checkpoints
// takes a while under load, and what inst delivered meanwhile is past the
// checkpoints read and comes again (seed 5, failover-unacked, under load:
// a delivery made after now fell outside the kill's window, and its two
// duplicates were charged to a promotion's window, one over its bound).
// With the shards it held (owned) and their checkpoints read just before
// the kill (since, read), that is every delivery of those shards by inst
// past its shard's checkpoint; a shard with no checkpoint is read again
// from its start position, so every delivery of it. Without them (Redis
// out of reach, or no lease read), the deliveries of inst in the
// killWindow before now stand for it.
func killedWindow(p Plan, start, now, dead time.Time, inst string, owned []string, since map[string]consumer.Position, read bool) Window {
	w := Window{What: "kill " + inst, Kind: "kill", Inst: inst, From: now.Add(-killWindow(p)), To: dead}
	if !read || len(owned) == 0 {
		return w
	}
	w.From, w.At, w.Shards, w.Since = start, now, map[string]bool{}, map[string]consumer.Position{}
	for _, id := range owned {
		w.Shards[id] = true
		if cp, ok := since[id]; ok {
			w.Since[id] = cp
		}
	}
	return w
}

// checkpointsOf reads the group's checkpoints of the shards in ids
// ("label/shard"); read is false when a stream's could not be read.
func (s *soak) checkpointsOf(ctx context.Context, ids []string) (map[string]consumer.Position, bool) {
	want := map[string]bool{}
	for _, id := range ids {
		label, _, _ := strings.Cut(id, "/")
		want[label] = true
	}
	out := map[string]consumer.Position{}
	for _, st := range s.liveStreams() {
		if !want[st.label] {
			continue
		}
		cctx, cancel := context.WithTimeout(ctx, 500*time.Millisecond)
		cps, err := st.store.Checkpoints(cctx)
		cancel()
		if err != nil {
			return nil, false
		}
		delete(want, st.label)
		if st.dyn {
			// A name created again may still hold its deleted
			// incarnation's checkpoints (soak_checkpoints.go): its
			// shards are held whole.
			continue
		}
		for shard, p := range cps {
			out[st.label+"/"+shard] = p
		}
	}
	return out, len(want) == 0
}

// ownedBy lists the shards in's process holds a live lease of; complete
// is false when a stream's leases could not be read.
func (s *soak) ownedBy(ctx context.Context, in *incarnation) (owned []string, complete bool) {
	pid := "-" + strconv.Itoa(in.cmd.Process.Pid) + "-"
	complete = true
	for _, st := range s.liveStreams() {
		lctx, cancel := context.WithTimeout(ctx, 500*time.Millisecond)
		leases, err := st.store.Leases(lctx)
		cancel()
		if err != nil {
			complete = false
			continue // Redis may be paused
		}
		for shard, l := range leases {
			if !l.Expired && strings.Contains(l.Owner, pid) {
				owned = append(owned, st.label+"/"+shard)
			}
		}
	}
	return owned, complete
}

// scopedStreams are the streams the deny and reshard classes act on.
func (s *soak) scopedStreams() []*soakStream {
	var out []*soakStream
	for _, st := range s.streams {
		if st.scoped {
			out = append(out, st)
		}
	}
	return out
}

// deny answers AccessDenied to every GetShardIterator of one stream for a
// while. Every iterator expires once at its start, so each of that
// stream's readers needs a new one it cannot get; the other streams' get
// theirs and must go on reading.
func (s *soak) deny(ctx context.Context, e soakEvent) error {
	st := s.scopedStreams()[e.target%len(s.scopedStreams())]
	s.smu.Lock()
	if s.denied[st.name] {
		s.smu.Unlock()
		return nil
	}
	s.denied[st.name] = true
	s.kicks++
	s.smu.Unlock()
	s.faultBegin(st.name)
	s.applyFront()
	s.note("deny %s: AccessDeniedException on its GetShardIterator for %v", st.name, e.dur.Round(100*time.Millisecond))
	sleepCtx(ctx, 1500*time.Millisecond)
	s.smu.Lock()
	s.kicks--
	s.smu.Unlock()
	s.applyFront()
	sleepCtx(ctx, e.dur)
	s.smu.Lock()
	delete(s.denied, st.name)
	s.smu.Unlock()
	s.applyFront()
	s.faultEnd(st.name)
	s.note("deny %s ends", st.name)
	return nil
}

// reshard splits a shard of a stream, or merges two, keeping it between
// its first shard count and three more.
func (s *soak) reshard(ctx context.Context, e soakEvent) error {
	st := s.scopedStreams()[e.target%len(s.scopedStreams())]
	st.reshard.Lock()
	defer st.reshard.Unlock()
	if _, err := s.waitActive(ctx, st.name); err != nil {
		return err
	}
	open, err := s.openShardsOf(ctx, st.name)
	if err != nil {
		return err
	}
	s.faultBegin(st.name)
	defer s.faultEnd(st.name)
	if (e.target/7%2 == 1 && len(open) > 1) || len(open) >= st.shards+3 {
		s.note("merge two shards of %s (%d open)", st.name, len(open))
		err = s.mergeStream(ctx, st.name)
	} else {
		s.note("split a shard of %s (%d open)", st.name, len(open))
		err = s.splitStream(ctx, st.name)
	}
	if kinesisx.ErrorCode(err) == kinesisx.CodeResourceInUse {
		// The emulator may still be settling a child; a reshard it refuses
		// is skipped, not the end of the soak.
		s.note("reshard of %s refused, skipped: %v", st.name, err)
		err = nil
	}
	// A child is read once its parents are read to their end.
	sleepCtx(ctx, 2*s.plan.LeasePeriod)
	return err
}

func (s *soak) setStorm(on bool) {
	s.smu.Lock()
	if on {
		s.storm++
	} else {
		s.storm--
	}
	s.smu.Unlock()
	s.applyFront()
}

// applyFront sets the proxy's faults from what is under way: the chaos
// suite's rates (kinesis class), a storm, denied streams, an expiry kick.
func (s *soak) applyFront() {
	s.smu.Lock()
	storm, kick := s.storm > 0, s.kicks > 0
	var denied []string
	for st := range s.denied {
		denied = append(denied, st)
	}
	s.smu.Unlock()
	s.front.ClearAll()
	all := faultproxy.Rule{}
	rf := faultproxy.ReadFaults{}
	if s.on[ClassKinesis] {
		Faults(s.front)
		all = faultproxy.Rule{ThrottleRate: 0.10, ErrorRate: 0.01, CutRate: 0.005}
		rf = faultproxy.ReadFaults{ExpiredIteratorRate: 0.01, ResetRate: 0.01}
	}
	if storm {
		all = faultproxy.Rule{ThrottleRate: 0.5, ErrorRate: 0.1, CutRate: 0.01}
		s.front.Set(faultproxy.AllOperations, all)
		s.front.Set("PutRecords", faultproxy.Rule{ThrottleRate: 0.3, ErrorRate: 0.05, CutRate: 0.01, CutAfterRate: 0.01, EntryFailRate: 0.2})
		rf = faultproxy.ReadFaults{ExpiredIteratorRate: 0.2, ResetRate: 0.05}
	}
	if kick {
		rf.ExpiredIteratorRate = 1
	}
	s.front.SetReadFaults(rf)
	if len(denied) > 0 {
		hooks := make([]func(string, []byte) *faultproxy.Response, len(denied))
		for i, st := range denied {
			hooks[i] = faultproxy.DenyStream(st)
		}
		gsi := all
		gsi.Hook = func(op string, body []byte) *faultproxy.Response {
			for _, h := range hooks {
				if r := h(op, body); r != nil {
					return r
				}
			}
			return nil
		}
		s.front.Set("GetShardIterator", gsi)
	}
}
