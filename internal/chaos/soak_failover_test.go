package chaos

import (
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/connect-kinesis/connect-kinesis/internal/consumer"
)

// failoverRun is key k0's records 1..6 on shard s0, first delivered by a1
// in the first 6 ms; the master had committed up to 5, the promoted
// replica up to 2 (records 3 to 5 were committed in the replication lag).
func failoverRun(t0 time.Time) (map[string]int, []Record, []Delivery, map[string]consumer.Position, map[string]consumer.Position) {
	var stream []Record
	var ds []Delivery
	for c := 1; c <= 6; c++ {
		seq := fmt.Sprint(c)
		stream = append(stream, Record{Shard: "s0", Seq: seq, K: "k0", C: c})
		ds = append(ds, Delivery{K: "k0", C: c, Shard: "s0", Seq: seq, Inst: "a1", At: t0.Add(time.Duration(c) * time.Millisecond), Redelivered: "false", Attempt: "1"})
	}
	lost := map[string]consumer.Position{"s0": {Sequence: "5"}}
	promoted := map[string]consumer.Position{"s0": {Sequence: "2"}}
	return map[string]int{"k0": 6}, stream, ds, lost, promoted
}

// checkFailover checks the run with the promotion's windows and the
// records in again (each once, by b1, after the promotion).
func checkFailover(t *testing.T, minReplicas int, promoted map[string]consumer.Position, readAgain ...int) Table {
	t.Helper()
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	perKey, stream, ds, lost, _ := failoverRun(t0)
	ws := failoverWindows(failoverClass(minReplicas, promoterSoak), minReplicas, soakPlan, t0, t0.Add(time.Second), t0.Add(1500*time.Millisecond), t0.Add(2*time.Second), lost, promoted)
	for _, c := range readAgain {
		ds = append(ds, again(ds[c-1], "b1", t0.Add(3*time.Second)))
	}
	return Check(perKey, stream, ds, ws, nil, nil)
}

func tallyOf(t *testing.T, tab Table, kind string) WindowTally {
	t.Helper()
	for _, w := range tab.Windows {
		if w.Kind == kind {
			return w
		}
	}
	require.Failf(t, "no window", "no window of kind %q in %+v", kind, tab.Windows)
	return WindowTally{}
}

// TestFailoverUnackedExcusesTheCommitsTheLagLostAndCountsThem guards the
// failover-unacked verdict: the records between the promoted replica's
// checkpoint and the master's (3 to 5) come again within a window of their
// own whose bound is those three records, counted on the verdict line as
// excused_dups_failover_lag; the record past the master's checkpoint (6)
// is the kill-style window's; nothing breaches.
func TestFailoverUnackedExcusesTheCommitsTheLagLostAndCountsThem(t *testing.T) {
	_, _, _, _, promoted := failoverRun(time.Time{})
	tab := checkFailover(t, 0, promoted, 3, 4, 5, 6)
	assert.Zero(t, tab.WindowBreaches, tab.String())
	assert.Zero(t, tab.DupsOutsideWindows, tab.String())
	lag := tallyOf(t, tab, failoverLagKind)
	assert.Equal(t, 3, lag.Bound, "the lag window's bound is the records committed in the lag")
	assert.Equal(t, 3, lag.Dups)
	main := tallyOf(t, tab, ClassFailoverUnacked)
	assert.Equal(t, 1, main.Bound, "past the master's last checkpoint: record 6")
	assert.Equal(t, 1, main.Dups)
	assert.Contains(t, Verdict{Table: tab}.Line(), "excused_dups_failover_lag=3")
}

// TestFailoverUnackedBreachesOnARecordTheReplicaHadCommitted guards the
// lag window's lower end: record 2 was committed on the replica before
// the promotion, so reading it again is no loss of the lag's; it breaches.
func TestFailoverUnackedBreachesOnARecordTheReplicaHadCommitted(t *testing.T) {
	_, _, _, _, promoted := failoverRun(time.Time{})
	tab := checkFailover(t, 0, promoted, 2)
	assert.Equal(t, 1, tab.WindowBreaches+tab.DupsOutsideWindows, tab.String())
	assert.False(t, tab.OK())
}

// TestFailoverUnackedBoundIsEveryRecordWhenTheReplicaHadNoCheckpoint
// guards the bound's source: a shard the replica had no checkpoint of is
// read from its start, so every record up to the master's checkpoint is
// in the lag window's bound (5), not a constant.
func TestFailoverUnackedBoundIsEveryRecordWhenTheReplicaHadNoCheckpoint(t *testing.T) {
	tab := checkFailover(t, 0, map[string]consumer.Position{}, 1, 2, 3, 4, 5)
	assert.Zero(t, tab.WindowBreaches, tab.String())
	lag := tallyOf(t, tab, failoverLagKind)
	assert.Equal(t, 5, lag.Bound)
	assert.Equal(t, 5, lag.Dups)
}

// TestFailoverAckedLosesNoAcknowledgedCheckpoint guards the
// failover-acked verdict: with min_replicas_to_ack 1 every acknowledged
// commit is on the promoted replica, so a record at or before its
// checkpoint (1, 2) read again breaches, there is no lag excuse, and the
// records past it (3 to 6, whose commits the replica never confirmed) are
// the kill-style bound.
func TestFailoverAckedLosesNoAcknowledgedCheckpoint(t *testing.T) {
	_, _, _, _, promoted := failoverRun(time.Time{})
	tab := checkFailover(t, 1, promoted, 3, 4, 5, 6)
	assert.Zero(t, tab.WindowBreaches, tab.String())
	assert.Zero(t, tab.DupsOutsideWindows, tab.String())
	main := tallyOf(t, tab, ClassFailoverAcked)
	assert.Equal(t, 4, main.Bound)
	for _, w := range tab.Windows {
		assert.NotEqual(t, failoverLagKind, w.Kind, "min_replicas_to_ack 1 excuses no lost commit")
	}
	assert.Contains(t, Verdict{Table: tab}.Line(), "excused_dups_failover_lag=0")

	tab = checkFailover(t, 1, promoted, 2)
	assert.Equal(t, 1, tab.WindowBreaches+tab.DupsOutsideWindows, "record 2's commit was acknowledged: %s", tab.String())
}

// TestFailoverClassesPickOneMinReplicas guards the mode: each class sets
// min_replicas_to_ack, and with both on the seed picks one.
func TestFailoverClassesPickOneMinReplicas(t *testing.T) {
	n, sen, on := failoverMode(map[string]bool{ClassFailoverAcked: true}, 2)
	assert.Equal(t, []any{1, promoterSoak, true}, []any{n, sen, on})
	n, sen, on = failoverMode(map[string]bool{ClassFailoverUnacked: true}, 3)
	assert.Equal(t, []any{0, promoterSoak, true}, []any{n, sen, on})
	_, _, on = failoverMode(map[string]bool{ClassKill: true}, 3)
	assert.False(t, on)
	a, _, _ := failoverMode(map[string]bool{ClassFailoverAcked: true, ClassFailoverUnacked: true}, 2)
	b, _, _ := failoverMode(map[string]bool{ClassFailoverAcked: true, ClassFailoverUnacked: true}, 3)
	assert.NotEqual(t, a, b)
	assert.NotContains(t, DefaultClasses(), ClassFailoverAcked)
	assert.NotContains(t, DefaultClasses(), ClassFailoverUnacked)
}

// TestFailoverSentinelClassesRunThroughTheSentinel guards the sentinel
// classes' mode: each runs the instances through a Sentinel with its own
// min_replicas_to_ack, named back by failoverClass (the report's and the
// windows' name); with a sentinel class and a proxy one on, the seed picks
// either; neither is a default class.
func TestFailoverSentinelClassesRunThroughTheSentinel(t *testing.T) {
	assertFailoverClassMode(t, ClassFailoverSentinelAcked, 1, promoterSentinel)
	assertFailoverClassMode(t, ClassFailoverSentinelUnacked, 0, promoterSentinel)
	assert.Equal(t, ClassFailoverAcked, failoverClass(1, promoterSoak))
	assert.Equal(t, ClassFailoverUnacked, failoverClass(0, promoterSoak))
	picked := map[promoter]bool{}
	for seed := uint64(0); seed < 4; seed++ {
		n, sen, _ := failoverMode(map[string]bool{ClassFailoverAcked: true, ClassFailoverSentinelAcked: true}, seed)
		assert.Equal(t, 1, n)
		picked[sen] = true
	}
	assert.Len(t, picked, 2, "the seed picks either class")
}

// TestFailoverSentinelUnackedNamesItsWindowsAndCountsTheLag guards the
// sentinel classes' windows: the same rule as failover-unacked's (the
// lag's records excused once and counted as excused_dups_failover_lag),
// under the class's own name.
func TestFailoverSentinelUnackedNamesItsWindowsAndCountsTheLag(t *testing.T) {
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	perKey, stream, ds, lost, promoted := failoverRun(t0)
	ws := failoverWindows(ClassFailoverSentinelUnacked, 0, soakPlan, t0, t0.Add(time.Second), t0.Add(1500*time.Millisecond), t0.Add(2*time.Second), lost, promoted)
	for _, c := range []int{3, 4, 5, 6} {
		ds = append(ds, again(ds[c-1], "b1", t0.Add(3*time.Second)))
	}
	tab := Check(perKey, stream, ds, ws, nil, nil)
	assert.Zero(t, tab.WindowBreaches+tab.DupsOutsideWindows, tab.String())
	assert.Equal(t, 3, tallyOf(t, tab, failoverLagKind).Dups, tab.String())
	tallyOf(t, tab, ClassFailoverSentinelUnacked)
	assert.Contains(t, Verdict{Table: tab}.Line(), "excused_dups_failover_lag=3")
}

// TestFailoverExcusesNoUnmarkedDuplicateOfARecordDeliveredLongBeforeTheLag
// guards the promotion's mark excuse: only the marks written in the
// replication lag are lost, so a record first delivered a minute before
// the promotion (its mark long on the replica) and read again unmarked
// after it breaks the mark's promise; a record first delivered in the lag
// and read again unmarked is excused. Both are past the checkpoints, so
// each is also a duplicate the promotion's bound allows.
func TestFailoverExcusesNoUnmarkedDuplicateOfARecordDeliveredLongBeforeTheLag(t *testing.T) {
	for _, minReplicas := range []int{0, 1} {
		t.Run(failoverClass(minReplicas, promoterSoak), func(t *testing.T) {
			t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
			perKey, stream, ds, lost, promoted := failoverRun(t0)
			from, back := t0.Add(time.Minute), t0.Add(time.Minute+2*time.Second)
			// Record 6 was first delivered at t0+6ms; record 7 in the lag.
			stream = append(stream, Record{Shard: "s0", Seq: "7", K: "k0", C: 7})
			perKey["k0"] = 7
			ds = append(ds, Delivery{K: "k0", C: 7, Shard: "s0", Seq: "7", Inst: "a1", At: from.Add(500 * time.Millisecond), Redelivered: "false", Attempt: "1"})
			ws := failoverWindows(failoverClass(minReplicas, promoterSoak), minReplicas, soakPlan, t0, from, from, back, lost, promoted)
			unmarked := func(d Delivery) Delivery {
				d = again(d, "b1", back.Add(time.Second))
				d.Redelivered, d.Attempt = "", "1"
				return d
			}
			ds = append(ds, unmarked(ds[5]), unmarked(ds[6]))
			tab := Check(perKey, stream, ds, ws, nil, nil)
			assert.Equal(t, 1, tab.Marks.UnmarkedDups, "record 6's mark was on the replica a minute before the lag: %s", tab.String())
			assert.Equal(t, 1, tab.Marks.Excused, "record 7's mark was written in the lag: %s", tab.String())
			assert.Zero(t, tab.WindowBreaches+tab.DupsOutsideWindows, tab.String())
		})
	}
}

// TestFailoverClusterClassesRunOnTheCluster guards the cluster classes'
// mode: each runs the instances on a Redis Cluster with its own
// min_replicas_to_ack, named back by failoverClass; neither is a default
// class; and the classes that act on the one Redis server are refused
// beside them, by name.
func TestFailoverClusterClassesRunOnTheCluster(t *testing.T) {
	assertFailoverClassMode(t, ClassFailoverClusterAcked, 1, promoterCluster)
	assertFailoverClassMode(t, ClassFailoverClusterUnacked, 0, promoterCluster)
	assert.NoError(t, clusterRefuses(map[string]bool{ClassKill: true, ClassFailoverClusterAcked: true}))
	err := clusterRefuses(map[string]bool{ClassRedisPause: true, ClassRedisCut: true, ClassKill: true})
	require.Error(t, err)
	assert.Contains(t, err.Error(), ClassRedisPause)
	assert.Contains(t, err.Error(), ClassRedisCut)
	assert.NotContains(t, err.Error(), ClassKill)
}

// assertFailoverClassMode checks that class, on with kill, runs with
// minReplicas and by whatever the seed, is named back by failoverClass,
// and is a class but not a default one.
func assertFailoverClassMode(t *testing.T, class string, minReplicas int, by promoter) {
	t.Helper()
	for seed := uint64(0); seed < 4; seed++ {
		n, got, on := failoverMode(map[string]bool{class: true, ClassKill: true}, seed)
		assert.Equal(t, []any{minReplicas, by, true}, []any{n, got, on}, class)
		assert.Equal(t, class, failoverClass(n, got))
	}
	assert.NotContains(t, DefaultClasses(), class)
	assert.True(t, isClass(class), class)
}

// TestSlotOwnerFindsTheLiveMasterOfTheSlotAndItsReplica guards the cluster
// classes' choice of the servers to fail: the master serving the slot
// (not one whose range ends before it, nor a failed one still listed with
// it), and the live replica of that master.
func TestSlotOwnerFindsTheLiveMasterOfTheSlotAndItsReplica(t *testing.T) {
	nodes := parseClusterNodes(`a1 127.0.0.1:7001@17001 myself,master - 0 0 1 connected 0-5460
b1 127.0.0.1:7002@17002 master - 0 0 2 connected 5461-10922
c1 127.0.0.1:7003@17003 master,fail - 0 0 3 connected
c2 127.0.0.1:7006@17006 master - 0 0 7 connected 10923-16383 [16000->-a1]
a2 127.0.0.1:7004@17004 slave a1 0 0 1 connected
b2 127.0.0.1:7005@17005 slave b1 0 0 2 connected
c3 127.0.0.1:7007@17007 slave,fail c2 0 0 7 connected
c4 127.0.0.1:7008@17008 slave c2 0 0 7 connected
`)
	m, r, err := slotOwner(nodes, 5461)
	require.NoError(t, err)
	assert.Equal(t, []int{7002, 7005}, []int{m, r})
	m, r, err = slotOwner(nodes, 12000)
	require.NoError(t, err)
	assert.Equal(t, []int{7006, 7008}, []int{m, r})
	_, _, err = slotOwner(parseClusterNodes("a1 127.0.0.1:7001@17001 master - 0 0 1 connected 0-16383\n"), 3)
	assert.ErrorContains(t, err, "no live replica")
	assert.True(t, myselfMaster("a1 127.0.0.1:7001@17001 myself,master - 0 0 1 connected 0-16383\nb 127.0.0.1:7002@17002 slave a1 0 0 1 connected\n"))
	assert.False(t, myselfMaster("a1 127.0.0.1:7001@17001 master - 0 0 1 connected 0-16383\nb 127.0.0.1:7002@17002 myself,slave a1 0 0 1 connected\n"))
}
