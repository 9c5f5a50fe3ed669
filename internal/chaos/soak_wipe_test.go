package chaos

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestSoakWipeWidensOnlyShardsWithoutALiveHolder (issue 34, seed 2's
// a-k4/158): a wipe gives a window over every earlier delivery only to the
// shards no live, running instance held just before it (its holder killed
// long before, its lease lapsed, its holder paused); a shard a live
// instance held keeps the usual windows, so a duplicate of it outside them
// still fails the soak.
func TestSoakWipeWidensOnlyShardsWithoutALiveHolder(t *testing.T) {
	const (
		held    = "soak-a/shardId-000000000000" // a live instance (pid 100) held it
		killed  = "soak-a/shardId-000000000001" // its holder (pid 200) was killed 34 s before
		lapsed  = "soak-a/shardId-000000000002" // no live lease
		paused  = "soak-b/shardId-000000000000" // its holder (pid 300) is paused
		unknown = "soak-b/shardId-000000000001" // listed, never leased
	)
	holders := map[string]int{held: 100, killed: 200, lapsed: 0, paused: 300, unknown: 0}
	live := map[int]bool{100: true, 400: true}
	unheld := unheldShards(holders, live)
	assert.Equal(t, map[string]bool{killed: true, lapsed: true, paused: true, unknown: true}, unheld)

	t0 := time.Now()
	s, m := streamsSoak(t0.Add(-time.Minute))
	s.widenForWipe("redis-empty of shards no live instance held", "redis-empty, no live holder (start position)", t0.Add(-5*time.Second), unheld)
	var stream []Record
	for i, shard := range []string{held, killed} {
		first := Delivery{K: "a-k4", C: 158 + i, Shard: shard, Seq: "4968", Inst: "a7", At: t0.Add(-30 * time.Second)}
		again := first
		again.Inst, again.At, again.Redelivered = "b3", t0.Add(5*time.Second), "true"
		m.pending = append(m.pending, first, again)
		stream = append(stream, Record{Shard: shard, Seq: "4968", K: "a-k4", C: 158 + i})
	}
	m.deliveries(t0.Add(time.Hour), true)
	assert.Equal(t, 1, m.v.DupsBy["redis-empty of shards no live instance held"], "the killed holder's shard is read again from the start")
	assert.Equal(t, 1, m.v.DupsOutside, "the live holder's shard is not")
	assert.Contains(t, m.v.First, "a-k4/158 of "+held)
	table := Check(producedCounters(stream), stream, m.all, s.windows, nil, nil)
	assert.Equal(t, 1, table.DupsOutsideWindows)
	assert.Equal(t, 1, table.Windows[0].Bound, "only the unheld shard's first delivery is in the window")
}

// TestSoakWipeWidensTheShardsOfAHolderStoppedJustAfter: a holder live at
// the wipe that stopped, or was paused, within a lease after it may not
// have written its shards back: they get the window too; a holder still
// running does not.
func TestSoakWipeWidensTheShardsOfAHolderStoppedJustAfter(t *testing.T) {
	holders := map[string]int{"soak-a/s0": 100, "soak-a/s1": 200, "soak-a/s2": 300, "soak-a/s3": 0}
	before := map[int]bool{100: true, 200: true, 300: true}
	now := map[int]bool{100: true}
	assert.Equal(t, map[string]bool{"soak-a/s1": true, "soak-a/s2": true}, lostHolders(holders, before, now, nil))
	assert.Empty(t, lostHolders(holders, before, before, nil))
	// A holder running at both moments but out of reach between them
	// (paused, or cut off from Redis) lost its shards too.
	assert.Equal(t, map[string]bool{"soak-a/s0": true}, lostHolders(holders, before, before, map[int]bool{100: true}))
}

// An instance paused or cut off from Redis at any moment since a wipe
// began counts as out of reach then, whether the outage still lasts or
// ended after the wipe; one that ended before it does not.
func TestSoakOutOfReachSinceAWipe(t *testing.T) {
	s, _ := streamsSoak(time.Now())
	s.outage(1, true)
	s.outage(1, false)
	wipe := time.Now()
	time.Sleep(time.Millisecond)
	s.outage(2, true)
	s.outage(2, false)
	s.outage(3, true)
	assert.Equal(t, map[int]bool{2: true, 3: true}, s.outSince(wipe))
}

// A wipe whose shard listing fails (a storm, a busy emulator) still names
// the stream's shards from its last listing, so their windows are not
// lost with it (seed 3, 1 h: a wipe at 55 min widened none, and the shard
// of a holder that stopped just after it was read again from the start,
// every duplicate counted as unexplained).
func TestSoakWipeNamesTheShardsOfAFailedListing(t *testing.T) {
	s, _ := streamsSoak(time.Now())
	assert.Empty(t, s.lastListed("soak-a", nil, false), "nothing listed yet")
	ids := []string{"shardId-000000000000", "shardId-000000000001"}
	assert.Equal(t, ids, s.lastListed("soak-a", ids, true))
	assert.Equal(t, ids, s.lastListed("soak-a", nil, false), "a failed listing names the last one's shards")
	assert.Empty(t, s.lastListed("soak-b", nil, false), "per stream")
	assert.Equal(t, ids[:1], s.lastListed("soak-a", ids[:1], true), "a listing that succeeds replaces it")
}

// Every wipe's holders go to wipes.log whole: the report names six shards,
// and a duplicate judged against a live holder must be traceable to it.
func TestSoakWipeWritesEveryHolder(t *testing.T) {
	s, _ := streamsSoak(time.Now())
	s.cfg.Dir = t.TempDir()
	holders := map[string]int{}
	for i := range 9 {
		holders[fmt.Sprintf("soak-a/shardId-%012d", i)] = i % 3 * 100
	}
	s.recordHolders(ClassRedisFlush, holders, map[int]bool{100: true})
	s.recordHolders(ClassRedisEmpty, map[string]int{"soak-b/shardId-000000000000": 0}, nil)
	b, err := os.ReadFile(filepath.Join(s.cfg.Dir, "wipes.log"))
	require.NoError(t, err)
	got := string(b)
	assert.Contains(t, got, "soak-a/shardId-000000000008 200 stopped or paused")
	assert.Contains(t, got, "soak-a/shardId-000000000007 100 live")
	assert.Contains(t, got, "soak-a/shardId-000000000006 none")
	assert.Contains(t, got, ClassRedisEmpty+"\n  soak-b/shardId-000000000000 none\n", "a second wipe is appended")
	assert.Equal(t, 9+1+2, strings.Count(got, "\n"), "one line a shard, one a wipe")
}

// The report names the first problem of every invariant broken, even once
// more problems of another than it lists came first.
func TestSoakReportNamesEveryInvariantBroken(t *testing.T) {
	s, _ := streamsSoak(time.Now())
	m := newMonitor(s)
	for i := range maxProblems + 3 {
		m.fail("redelivery mark", "record %d", i)
	}
	m.fail("order", "k/2 first delivered after k/3")
	m.fail("order", "k/5 first delivered after k/6")
	m.fail("liveness", "shard s0")
	probs := strings.Join(m.v.Problems, "\n")
	assert.Contains(t, probs, "order: k/2 first delivered after k/3")
	assert.NotContains(t, probs, "k/5")
	assert.Contains(t, probs, "liveness: shard s0")
	assert.Len(t, m.v.Problems, maxProblems+2)
	assert.Equal(t, "redelivery mark: record 0", m.v.First)
}
