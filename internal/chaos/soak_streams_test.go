package chaos

import (
	"context"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/connect-kinesis/connect-kinesis/internal/consumer"
)

// streamsSoak is a soak with no processes, whose monitor judges what the
// test hands it.
func streamsSoak(t0 time.Time) (*soak, *monitor) {
	s := &soak{runner: &runner{logf: func(string, ...any) {}, plan: soakPlan}, start: t0, on: classesOn(ClassStreams),
		nackers: map[string]bool{}, plain: map[string]bool{"a1": true, "b1": true}}
	return s, newMonitor(s)
}

// shadowOf gives the monitor's shadow shard id n records, k0/1.., seen at
// seen.
func shadowOf(m *monitor, id string, n int, seen time.Time) *shadowShard {
	ss := &shadowShard{id: id}
	for c := 1; c <= n; c++ {
		ss.recs = append(ss.recs, Record{Shard: id, Seq: strconv.Itoa(100 + c), K: "dyn-1#1-k0", C: c})
		ss.seenAt = append(ss.seenAt, seen)
		if ss.seqs == nil {
			ss.seqs = map[string]bool{}
		}
		ss.seqs[strconv.Itoa(100+c)] = true
	}
	m.sh.shards[id] = ss
	m.sh.order = append(m.sh.order, id)
	return ss
}

func deliveryOf(ss *shadowShard, i int, inst string, at time.Time) Delivery {
	r := ss.recs[i]
	return Delivery{K: r.K, C: r.C, Shard: r.Shard, Seq: r.Seq, Inst: inst, At: at}
}

// TestSoakStreamDeletedWithRecordsUndeliveredFails: a stream of the class
// deleted with a record neither delivered nor dead-lettered is reported
// once every delivery stamped before the deletion is in, and the checker
// counts the record lost: the ground truth keeps a deleted stream's
// records. Deleted with every record delivered, nothing is reported.
func TestSoakStreamDeletedWithRecordsUndeliveredFails(t *testing.T) {
	for _, tc := range []struct {
		name      string
		delivered int
		unread    int
	}{{"one record left", 2, 1}, {"every record delivered", 3, 0}} {
		t.Run(tc.name, func(t *testing.T) {
			t0 := time.Now()
			s, m := streamsSoak(t0)
			const id = "soak-dyn-1#1/shardId-000000000000"
			ss := shadowOf(m, id, 3, t0)
			st := &soakStream{name: "soak-dyn-1", label: "soak-dyn-1#1", dyn: true, drainFrom: t0.Add(time.Second), deleted: t0.Add(10 * time.Second)}
			s.dyn = []*soakStream{st}
			for i := range tc.delivered {
				m.pending = append(m.pending, deliveryOf(ss, i, "a1", t0.Add(time.Duration(i)*time.Second)))
			}
			m.deliveries(t0.Add(time.Minute), false)
			// A check just after the deletion waits for the lines stamped
			// before it.
			m.streamsClass(t0.Add(11*time.Second), false)
			assert.Zero(t, m.v.DeletedUnread, "judged before every delivery stamped before the deletion is in")
			m.streamsClass(t0.Add(14*time.Second), false)
			assert.Equal(t, tc.unread, m.v.DeletedUnread)
			if tc.unread > 0 {
				assert.Contains(t, m.v.First, "deleted stream: soak-dyn-1#1 was deleted with 1 records undelivered")
			} else {
				assert.Empty(t, m.v.First)
			}
			// Judged once, and the checker counts what was left as lost.
			m.streamsClass(t0.Add(20*time.Second), true)
			assert.Equal(t, tc.unread, m.v.DeletedUnread)
			stream, err := m.sh.all(context.Background(), m.streamRefs())
			require.NoError(t, err)
			assert.Len(t, stream, 3)
			table := Check(producedCounters(stream), stream, m.all, nil, nil, nil)
			assert.Equal(t, tc.unread, table.InputLost)
			assert.True(t, m.caughtUp(), "what a deleted stream left does not hold the drain up")
			v := Verdict{Table: table, DeletedUnread: m.v.DeletedUnread, First: m.v.First}
			assert.Equal(t, tc.unread == 0, v.Pass())
		})
	}
}

// TestSoakStreamDrainCountsFromAReadAfterTheProducerStopped: a deletion
// waits for the monitor's count of what is left, taken from a read of the
// whole stream begun after the producer stopped; a read begun before it
// may miss the producer's last records and is not used.
func TestSoakStreamDrainCountsFromAReadAfterTheProducerStopped(t *testing.T) {
	t0 := time.Now()
	s, m := streamsSoak(t0)
	const id = "soak-dyn-2#1/shardId-000000000001"
	ss := shadowOf(m, id, 2, t0)
	st := &soakStream{name: "soak-dyn-2", label: "soak-dyn-2#1", dyn: true, drainFrom: t0.Add(5 * time.Second)}
	s.dyn = []*soakStream{st}
	m.sh.polledAt = map[string]time.Time{st.label: t0.Add(4 * time.Second)}
	m.streamsClass(t0.Add(6*time.Second), false)
	assert.True(t, st.judgedAt.IsZero(), "a read begun before the producer stopped is no count")
	m.sh.polledAt[st.label] = t0.Add(6 * time.Second)
	m.pending = []Delivery{deliveryOf(ss, 0, "a1", t0.Add(time.Second))}
	m.deliveries(t0.Add(7*time.Second), false)
	m.streamsClass(t0.Add(7*time.Second), false)
	assert.Equal(t, t0.Add(7*time.Second), st.judgedAt)
	assert.Equal(t, 1, st.unread)
	m.pending = []Delivery{deliveryOf(ss, 1, "b1", t0.Add(2*time.Second))}
	m.deliveries(t0.Add(9*time.Second), false)
	m.streamsClass(t0.Add(9*time.Second), false)
	assert.Zero(t, st.unread)
}

// TestSoakDeliveryOfADeletedStreamAfterItsDeletionFails: a record of a
// deleted incarnation delivered (stamped) past the slack after the
// deletion by an instance with a plain output, outside any pause, breaks
// "nothing of a deleted stream after its deletion"; one within the slack,
// by a slow output, inside a pause, or of the name's new incarnation does
// not.
func TestSoakDeliveryOfADeletedStreamAfterItsDeletionFails(t *testing.T) {
	t0 := time.Now()
	deleted := t0.Add(20 * time.Second)
	for _, tc := range []struct {
		name  string
		label string
		inst  string
		at    time.Time
		pause bool
		fails bool
	}{
		{"after the deletion", "soak-dyn-1#1", "a1", deleted.Add(5 * time.Second), false, true},
		{"within the slack", "soak-dyn-1#1", "a1", deleted.Add(time.Second), false, false},
		{"before the deletion", "soak-dyn-1#1", "a1", deleted.Add(-time.Second), false, false},
		{"by a slow output", "soak-dyn-1#1", "c1", deleted.Add(5 * time.Second), false, false},
		{"inside a pause", "soak-dyn-1#1", "a1", deleted.Add(5 * time.Second), true, false},
		{"of the new incarnation", "soak-dyn-1#2", "a1", deleted.Add(5 * time.Second), false, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s, m := streamsSoak(t0)
			s.dyn = []*soakStream{
				{name: "soak-dyn-1", label: "soak-dyn-1#1", dyn: true, drainFrom: t0, deleted: deleted},
				{name: "soak-dyn-1", label: "soak-dyn-1#2", dyn: true},
			}
			if tc.pause {
				s.windows = append(s.windows, Window{What: "pause b1", From: deleted, To: deleted.Add(10 * time.Second)})
			}
			m.pending = []Delivery{{K: "dyn-1#1-k0", C: 9, Shard: tc.label + "/shardId-000000000000", Seq: "109", Inst: tc.inst, At: tc.at}}
			m.deliveries(t0.Add(time.Hour), false)
			if tc.fails {
				assert.Equal(t, 1, m.v.StaleDeliveries)
				assert.True(t, strings.HasPrefix(m.v.First, "deleted stream: a1 delivered dyn-1#1-k0/9"), m.v.First)
				assert.False(t, Verdict{StaleDeliveries: m.v.StaleDeliveries}.Pass())
			} else {
				assert.Zero(t, m.v.StaleDeliveries)
				assert.Empty(t, m.v.First)
			}
		})
	}
}

// TestSoakNewStreamShardsReadWithinTheirBound: each shard with records of
// a stream created during the run is first delivered from within 3 ×
// discovery interval + lease period of the stream being ACTIVE (or of the
// last fault's end); not judged while a fault is under way; a shard whose
// first record came late is judged from it.
func TestSoakNewStreamShardsReadWithinTheirBound(t *testing.T) {
	bound := newStreamBound(soakPlan.LeasePeriod)
	require.Equal(t, 18*time.Second, bound)
	t0 := time.Now()
	active := t0.Add(10 * time.Second)
	for _, tc := range []struct {
		name    string
		read    time.Duration // after ACTIVE; 0: never
		seen    time.Duration // first record in the stream, after ACTIVE
		faultOn bool
		quiet   time.Duration // the last fault ended, after ACTIVE
		now     time.Duration
		late    bool
	}{
		{"never read", 0, time.Second, false, 0, bound + holdBack + time.Second, true},
		{"read in time", 5 * time.Second, time.Second, false, 0, bound + holdBack + time.Second, false},
		{"not yet past the bound", 0, time.Second, false, 0, bound + holdBack - time.Second, false},
		{"a fault under way", 0, time.Second, true, 0, bound + holdBack + time.Second, false},
		{"a fault ended later", 0, time.Second, false, 10 * time.Second, bound + holdBack + time.Second, false},
		{"its first record came late", 0, bound, false, 0, bound + holdBack + time.Second, false},
		{"its first record came late, unread past it", 0, bound, false, 0, bound + newStreamSlack + holdBack + time.Second, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s, m := streamsSoak(t0)
			s.active, s.quiet = map[string]int{}, map[string]time.Time{}
			if tc.faultOn {
				s.active[""] = 1
			}
			if tc.quiet > 0 {
				s.quiet[""] = active.Add(tc.quiet)
			}
			st := &soakStream{name: "soak-dyn-3", label: "soak-dyn-3#1", dyn: true, during: true, active: active}
			s.dyn = []*soakStream{st}
			ss := shadowOf(m, "soak-dyn-3#1/shardId-000000000000", 2, active.Add(tc.seen))
			shadowOf(m, "soak-dyn-3#1/shardId-000000000001", 0, active) // no records: nothing to judge
			if tc.read > 0 {
				m.pending = []Delivery{deliveryOf(ss, 0, "a1", active.Add(tc.read))}
				m.deliveries(active.Add(tc.now), false)
			}
			m.streamsClass(active.Add(tc.now), false)
			if tc.late {
				assert.Equal(t, 1, m.v.NewStreamLate)
				assert.Equal(t, 1, m.v.Liveness)
				assert.Contains(t, m.v.First, "liveness: soak-dyn-3#1/shardId-000000000000 of a stream created during the run")
			} else {
				assert.Zero(t, m.v.NewStreamLate)
				assert.Zero(t, m.v.Liveness)
			}
			if tc.read > 0 {
				assert.Equal(t, []time.Duration{tc.read}, m.v.NewStreamReads)
			}
		})
	}
}

// TestSoakCheckpointOfADeletedIncarnationIsNotARegression: a name created
// again keeps the deleted incarnation's checkpoints until its first take
// clears them; the regression check counts only checkpoints at records of
// the incarnation it judges.
func TestSoakCheckpointOfADeletedIncarnationIsNotARegression(t *testing.T) {
	_, m := streamsSoak(time.Now())
	shadowOf(m, "soak-dyn-1#2/shardId-000000000000", 3, time.Now())
	assert.True(t, m.ofIncarnation("soak-dyn-1#2/shardId-000000000000", consumer.Position{Sequence: "102"}))
	assert.False(t, m.ofIncarnation("soak-dyn-1#2/shardId-000000000000", consumer.Position{Sequence: "99999"}), "the old incarnation's")
	assert.False(t, m.ofIncarnation("soak-dyn-1#2/shardId-000000000001", consumer.Position{Sequence: "102"}), "a shard the shadow has not read")
}

// TestSoakStreamsScheduleCyclesAndLeavesTheOthers: the class's operations
// come in the cycle create, delete, re-create, replay from the seed, leave
// room for a new stream's bound before the load ends, and leave the other
// classes' schedule of the seed as it was.
func TestSoakStreamsScheduleCyclesAndLeavesTheOthers(t *testing.T) {
	lease := 3 * time.Second
	for seed := range uint64(10) {
		without := drawSchedule(seed, 3*time.Minute, 3, classesOn(DefaultClasses()...), lease)
		on := classesOn(DefaultClasses()...)
		on[ClassStreams] = true
		with := drawSchedule(seed, 3*time.Minute, 3, on, lease)
		var others, ops []soakEvent
		for _, e := range with {
			if e.class == ClassStreams {
				ops = append(ops, e)
			} else {
				others = append(others, e)
			}
		}
		var plain []soakEvent
		for _, e := range without {
			if e.class != ClassStreams {
				plain = append(plain, e)
			}
		}
		assert.Equal(t, plain, others, "seed %d", seed)
		require.GreaterOrEqual(t, len(ops), 3, "seed %d: a 3-minute run creates, deletes and re-creates", seed)
		for i, e := range ops {
			assert.Equal(t, []string{opCreate, opDelete, opRecreate}[i%3], e.op)
			if e.op != opDelete {
				assert.Less(t, e.at, 3*time.Minute-5*time.Second-newStreamBound(lease), "seed %d: %v", seed, e)
			}
		}
		assert.Equal(t, ops, drawStreams(seed, 3*time.Minute, lease))
	}
}

// A name created again: until every instance sees the new creation time,
// a reader of the deleted incarnation may read on into the new one, and
// the clear that follows has its records read again, marked (seed 5, 1 h:
// a19 delivered dyn-3#4-k0/1 1.7 s after the creation and again 1.3 s
// later). The window covers the new incarnation's shards, from its
// creation until two listings and a lease later; nothing else, and it
// excuses no missing mark.
func TestRecreatedStreamWindowExplainsItsFirstRecordsReadAgain(t *testing.T) {
	t0 := time.Now()
	st := &soakStream{name: "soak-dyn-3", label: "soak-dyn-3#4", shards: 2, dyn: true}
	w := recreatedWindow(st, t0, t0.Add(400*time.Millisecond), 3*time.Second)
	for _, tc := range []struct {
		name        string
		shard       string
		at          time.Duration
		redelivered string
		outside     int
		unmarked    bool
	}{
		{"its first records read again, marked", "soak-dyn-3#4/shardId-000000000001", 1700 * time.Millisecond, "true", 0, false},
		{"its other shard", "soak-dyn-3#4/shardId-000000000000", 5 * time.Second, "true", 0, false},
		{"read again unmarked", "soak-dyn-3#4/shardId-000000000001", 1700 * time.Millisecond, "", 0, true},
		{"first delivered after every instance saw it", "soak-dyn-3#4/shardId-000000000001", 14 * time.Second, "true", 1, false},
		{"the deleted incarnation's shard", "soak-dyn-3#3/shardId-000000000001", 1700 * time.Millisecond, "true", 1, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := &soak{runner: &runner{logf: func(string, ...any) {}}, nackers: map[string]bool{}}
			s.windows = []Window{w}
			m := newMonitor(s)
			first := Delivery{Inst: "a19", Shard: tc.shard, Seq: "4968", K: "dyn-3#4-k0", C: 1, At: t0.Add(tc.at), Attempt: "1"}
			again := first
			again.At, again.Redelivered = first.At.Add(1300*time.Millisecond), tc.redelivered
			m.pending = []Delivery{first, again}
			m.deliveries(t0.Add(time.Hour), true)
			assert.Equal(t, tc.outside, m.v.DupsOutside, "duplicates outside every window")
			assert.Equal(t, tc.unmarked, m.failed["redelivery mark"], "a missing mark is still reported")
			if tc.outside == 0 {
				assert.Equal(t, 1, m.v.DupsBy["recreated soak-dyn-3#4"])
			}
		})
	}
}

// The shadow of an incarnation deleted since reads on into the next one
// created under the name (kinesis-mock serves a shard by name): those
// records name the next incarnation and are not the deleted one's, so it
// is not failed as deleted with them undelivered (seed 6, 1 h:
// soak-dyn-3#9 got 110 of soak-dyn-3#10's records).
func TestShadowLeavesOutTheNextIncarnationsRecords(t *testing.T) {
	ss := &shadowShard{id: "soak-dyn-3#9/shardId-000000000000"}
	t0 := time.Now()
	require.NoError(t, ss.add("101", []byte(`{"k":"dyn-3#9-k0","c":1,"stream":"soak-dyn-3#9"}`), t0))
	require.NoError(t, ss.add("102", []byte(`{"k":"dyn-3#10-k4","c":1,"stream":"soak-dyn-3#10"}`), t0))
	require.NoError(t, ss.add("103", []byte(`{"k":"dyn-3#10-k4","c":2,"stream":"soak-dyn-3#10"}`), t0))
	assert.Equal(t, []Record{{Shard: ss.id, Seq: "101", K: "dyn-3#9-k0", C: 1}}, ss.recs)
	assert.Equal(t, 2, ss.foreign)

	plain := &shadowShard{id: "soak-a/shardId-000000000000"}
	require.NoError(t, plain.add("7", []byte(`{"k":"a-k0","c":3}`), t0))
	assert.Len(t, plain.recs, 1, "a stream of the load's own has no label in its records")
}

// Once the load is over the streams class creates nothing: an operation
// drawn before the end may run after it, and a stream created then would
// be written to all through the drain (seed 7, 1 h: soak-dyn-1#25's last
// 12 records counted as lost). No Kinesis client is set: a create would
// panic.
func TestSoakStreamsCreateNothingAfterTheLoad(t *testing.T) {
	s, _ := streamsSoak(time.Now())
	s.loadOver = true
	for _, op := range []string{opCreate, opRecreate} {
		require.NoError(t, s.streamsFault(t.Context(), soakEvent{class: ClassStreams, op: op}))
	}
	assert.Equal(t, 2, strings.Count(strings.Join(s.timeline, "\n"), "the load is over"), s.timeline)
	assert.Zero(t, s.dynNames, "no name drawn")
}

// Operations that waited their turn behind one that ended the run do
// nothing and say nothing (seed 13: 48 of them noted, at the instant the
// run ended, what they would have done). No Kinesis client is set: an
// operation carried out would panic.
func TestSoakStreamsDoNothingOnceTheRunEnded(t *testing.T) {
	s, _ := streamsSoak(time.Now())
	s.dyn = append(s.dyn, &soakStream{name: "soak-dyn-1", label: "soak-dyn-1#1"})
	ended, cancel := context.WithCancel(t.Context())
	cancel()
	for _, op := range []string{opCreate, opDelete, opRecreate} {
		require.NoError(t, s.streamsFault(ended, soakEvent{class: ClassStreams, op: op}))
	}
	assert.Empty(t, s.timeline)
}

// A deletion waits 5 minutes for the shadow's read of the stream, not
// counting the time the emulator stalled meanwhile, and 15 minutes at
// most.
func TestSoakDeletionWaitsForTheShadowPastEmulatorStalls(t *testing.T) {
	assert.False(t, shadowOverdue(4*time.Minute, 0))
	assert.True(t, shadowOverdue(5*time.Minute+time.Second, 0), "no stall: 5 minutes")
	assert.False(t, shadowOverdue(8*time.Minute, 4*time.Minute), "4 minutes of it stalled")
	assert.True(t, shadowOverdue(16*time.Minute, 14*time.Minute), "15 minutes at most")
}
