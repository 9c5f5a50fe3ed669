package chaos

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"sort"
	"time"
)

// The soak's fault classes (docs/data/soak-runs.md, "The soak", describes each).
const (
	ClassKill         = "kill"          // SIGKILL an instance, start it again 1-5 s later
	ClassTerm         = "term"          // SIGTERM an instance, start it again 1-20 s later (scale-in and back)
	ClassPause        = "pause"         // SIGSTOP an instance for most of a lease or past it, then SIGCONT
	ClassScale        = "scale"         // start an extra instance for 10-60 s, then SIGTERM it (scale-out and in)
	ClassRedisRestart = "redis-restart" // restart Redis, which keeps its data (AOF)
	ClassRedisEmpty   = "redis-empty"   // stop Redis, delete its data, start it again empty
	ClassRedisFlush   = "redis-flush"   // FLUSHALL
	ClassRedisPause   = "redis-pause"   // SIGSTOP Redis past the lease
	ClassRedisStall   = "redis-stall"   // SIGSTOP Redis for 0.3-2 s
	ClassKinesis      = "kinesis"       // throttling, 5xx, resets, expired iterators all along, and storms of them
	ClassDeny         = "deny"          // AccessDenied on one stream's GetShardIterator for 10-60 s
	ClassReshard      = "reshard"       // split or merge a shard of a stream
	ClassBudget       = "budget"        // a small max_buffered_bytes and a stream of 96 KiB records
	ClassOutput       = "output"        // instances whose output is slow, or nacks 2% of messages
	ClassKPL          = "kpl"           // a stream written with KPL aggregation on
	// ClassWipeHolder lets instance faults overlap a Redis wipe (flush or
	// empty restart). Off by default: see DefaultClasses.
	ClassWipeHolder = "wipe-holder"
	// ClassRedisCut holds every byte between one instance and Redis, both
	// ways, for a while, then delivers them late.
	ClassRedisCut = "redis-cut"
	// ClassStreams creates streams matching the instances' pattern with
	// load, deletes them, and creates a deleted name again with new data
	// (soak_streams.go).
	ClassStreams = "streams"
	// ClassEFO makes about half the incarnations read with enhanced
	// fan-out (SubscribeToShard on the emulator's TLS port, through a TCP
	// proxy), the others polling through the fault proxy as ever, and cuts
	// every connection of that proxy now and then: each live subscription
	// and call of the fan-out readers. Off by default: see DefaultClasses.
	ClassEFO = "efo"
)

// SoakClasses lists every class.
func SoakClasses() []string {
	return []string{ClassKill, ClassTerm, ClassPause, ClassScale, ClassRedisRestart, ClassRedisEmpty, ClassRedisFlush,
		ClassRedisPause, ClassRedisStall, ClassKinesis, ClassDeny, ClassReshard, ClassBudget, ClassOutput, ClassKPL, ClassRedisCut, ClassStreams, ClassWipeHolder, ClassEFO,
		ClassFailoverAcked, ClassFailoverUnacked, ClassFailoverSentinelAcked, ClassFailoverSentinelUnacked,
		ClassFailoverClusterAcked, ClassFailoverClusterUnacked}
}

// DefaultClasses is every class but wipe-holder and efo. An instance that is
// stopped (killed, terminated, scaled in) around a wipe cannot write back
// what it held, so its shards are read again from the group's start: the
// design's stated cost, which the soak then explains with a window over
// every earlier delivery of each shard no live, running instance held at
// the wipe (soak_wipe.go), so little else is checked for duplicates on
// those shards. A holder cut off at a wipe keeps its shards (the design's
// promise, which wipe-holder also tests). So the schedule keeps instance
// faults clear of wipes unless wipe-holder is on. efo takes half the
// incarnations' reads past the fault proxy, where the kinesis and deny
// classes do not reach them, so it is asked for by name. So are the
// failover classes: they change the store every other class runs against
// (a master and a replica behind proxies, two more processes on a machine
// the soak already loads) and fix the instances' min_replicas_to_ack, so a
// default run would no longer test the single server most deployments
// use; and only one of them runs at a time.
func DefaultClasses() []string {
	all := SoakClasses()
	return slices.DeleteFunc(all, func(c string) bool {
		return c == ClassWipeHolder || c == ClassEFO || isFailoverClass(c)
	})
}

func isClass(c string) bool { return slices.Contains(SoakClasses(), c) }

// soakEvent is one drawn fault: when it starts, for how long, on what.
type soakEvent struct {
	at, dur time.Duration
	class   string
	target  int    // an index into the instances, the streams, or a choice
	op      string // the streams class's operation (opCreate, ...)
}

func (e soakEvent) end() time.Duration { return e.at + e.dur }

// meanGap is the mean time between two faults of a class.
var meanGap = map[string]time.Duration{
	ClassKill: 25 * time.Second, ClassTerm: 45 * time.Second, ClassPause: 35 * time.Second, ClassScale: 60 * time.Second,
	ClassKinesis: 45 * time.Second, ClassDeny: 60 * time.Second, ClassReshard: 45 * time.Second,
}

// efoCutGap is the mean time between two cuts of the fan-out readers'
// connections.
const efoCutGap = 40 * time.Second

// redisClasses take turns: one Redis fault at a time.
var redisClasses = []string{ClassRedisRestart, ClassRedisEmpty, ClassRedisFlush, ClassRedisPause, ClassRedisStall, ClassFailoverAcked, ClassFailoverUnacked,
	ClassFailoverSentinelAcked, ClassFailoverSentinelUnacked, ClassFailoverClusterAcked, ClassFailoverClusterUnacked}

// drawSchedule draws every fault of the run from seed alone, so the same
// seed and build replay the same schedule. Faults start after a quiet
// first 10 s and end before the load does.
func drawSchedule(seed uint64, d time.Duration, instances int, on map[string]bool, lease time.Duration) []soakEvent {
	rng := rand.New(rand.NewPCG(seed, seed^0xc4a05))
	span := func(lo, hi time.Duration) time.Duration { return lo + time.Duration(rng.Int64N(int64(hi-lo)+1)) }
	first, last := 10*time.Second, d-5*time.Second
	var evs []soakEvent
	for _, class := range []string{ClassKill, ClassTerm, ClassPause, ClassScale, ClassKinesis, ClassDeny, ClassReshard} {
		if !on[class] {
			continue
		}
		for at := first + time.Duration(rng.ExpFloat64()*float64(meanGap[class])); at < last; at += time.Duration(rng.ExpFloat64() * float64(meanGap[class])) {
			e := soakEvent{at: at, class: class, target: rng.IntN(1 << 30)}
			switch class {
			case ClassKill:
				e.dur = span(time.Second, 5*time.Second)
			case ClassTerm:
				e.dur = span(time.Second, 20*time.Second)
			case ClassPause:
				// Half the pauses end before the lease would (60-90% of
				// it), half after it (1.2-2.5 leases).
				if rng.IntN(2) == 0 {
					e.dur = span(lease*6/10, lease*9/10)
				} else {
					e.dur = span(lease*12/10, lease*25/10)
				}
			case ClassScale:
				e.dur = span(10*time.Second, 60*time.Second)
			case ClassKinesis:
				e.dur = span(5*time.Second, 20*time.Second)
			case ClassDeny:
				e.dur = span(10*time.Second, 60*time.Second)
			}
			if e.end() < last {
				evs = append(evs, e)
			}
		}
	}
	var redis []string
	for _, c := range redisClasses {
		if on[c] {
			redis = append(redis, c)
		}
	}
	if len(redis) > 0 {
		for at := first + time.Duration(rng.ExpFloat64()*float64(30*time.Second)); at < last; {
			e := soakEvent{at: at, class: redis[rng.IntN(len(redis))]}
			switch e.class {
			case ClassRedisEmpty, ClassRedisPause:
				e.dur = span(lease*12/10, lease*2)
			case ClassRedisStall:
				e.dur = span(300*time.Millisecond, 2*time.Second)
			case ClassRedisRestart:
				e.dur = span(0, lease/2)
			case ClassFailoverAcked, ClassFailoverUnacked, ClassFailoverSentinelAcked, ClassFailoverSentinelUnacked,
				ClassFailoverClusterAcked, ClassFailoverClusterUnacked:
				// How long replication is held before the master dies:
				// the lag whose writes the promotion loses.
				e.dur = span(500*time.Millisecond, 2*time.Second)
			}
			if e.end() >= last {
				break
			}
			evs = append(evs, e)
			at = e.end() + lease + time.Duration(rng.ExpFloat64()*float64(30*time.Second))
		}
	}
	// Drawn last, so that switching it on leaves the other classes'
	// schedule of a seed as it was.
	if on[ClassRedisCut] {
		for at := first + time.Duration(rng.ExpFloat64()*float64(50*time.Second)); at < last; at += time.Duration(rng.ExpFloat64() * float64(50*time.Second)) {
			// Like pauses: half end before the lease would, half after it.
			e := soakEvent{at: at, class: ClassRedisCut, target: rng.IntN(1 << 30)}
			if rng.IntN(2) == 0 {
				e.dur = span(lease*6/10, lease*9/10)
			} else {
				e.dur = span(lease*12/10, lease*25/10)
			}
			if e.end() < last {
				evs = append(evs, e)
			}
		}
	}
	// Drawn from a generator of its own, so that switching it on or off
	// leaves the other classes' schedule of a seed as it was.
	if on[ClassEFO] {
		cuts := rand.New(rand.NewPCG(seed, seed^0xef0c))
		for at := first + time.Duration(cuts.ExpFloat64()*float64(efoCutGap)); at < last; at += time.Duration(cuts.ExpFloat64() * float64(efoCutGap)) {
			evs = append(evs, soakEvent{at: at, class: ClassEFO})
		}
	}
	if on[ClassStreams] {
		evs = append(evs, drawStreams(seed, d, lease)...)
	}
	if !on[ClassWipeHolder] {
		evs = clearOfWipes(evs, lease)
	}
	sort.SliceStable(evs, func(i, j int) bool { return evs[i].at < evs[j].at })
	return evs
}

// clearOfWipes drops the instance faults that could leave a shard without
// a live holder while Redis is wiped: from the fault's start to three
// leases after it ended.
func clearOfWipes(evs []soakEvent, lease time.Duration) []soakEvent {
	var wipes []soakEvent
	for _, e := range evs {
		if e.class == ClassRedisEmpty || e.class == ClassRedisFlush {
			wipes = append(wipes, e)
		}
	}
	return slices.DeleteFunc(evs, func(e soakEvent) bool {
		switch e.class {
		case ClassKill, ClassTerm, ClassPause, ClassScale, ClassRedisCut:
		default:
			return false
		}
		for _, w := range wipes {
			if e.at < w.end()+2*lease && e.end()+3*lease+2*time.Second > w.at {
				return true
			}
		}
		return false
	})
}

// describe names a drawn event for the report.
func (e soakEvent) String() string {
	if e.op != "" {
		return fmt.Sprintf("%v %s %s", e.at.Round(100*time.Millisecond), e.class, e.op)
	}
	return fmt.Sprintf("%v %s for %v", e.at.Round(100*time.Millisecond), e.class, e.dur.Round(100*time.Millisecond))
}
