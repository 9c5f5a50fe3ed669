package chaos

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
)

// A shard read again from its start after a wipe (soak-big in seed 5's
// hour): its oldest undelivered record waits behind the whole shard, but
// the reader moves. Liveness breaks only when the shard's read front has
// not moved forward for livenessBound; the drain waits while it moves.
func TestLivenessJudgesAShardReadAgainByItsFront(t *testing.T) {
	t0 := time.Now()
	const id = "soak-big/shardId-000000000000"
	for _, tc := range []struct {
		name string
		// reread are the records (indices) delivered again, one a
		// second from t0+40s, after the first pass delivered 0..4.
		reread  []int
		breach  bool
		drains  bool
		rewound bool
	}{
		{"moving through the records read again", []int{0, 1, 2, 3, 4}, false, true, false},
		{"stuck: nothing read again", nil, true, false, false},
		{"stuck on one record read again and again", []int{2, 2, 2, 2, 2}, true, false, false},
		{"moved, then stuck longer than the bound", []int{0, 1}, true, false, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s, m := streamsSoak(t0)
			s.active, s.quiet = map[string]int{}, map[string]time.Time{"": t0}
			ss := shadowOf(m, id, 8, t0)
			for i := range 5 {
				m.pending = append(m.pending, deliveryOf(ss, i, "a1", t0.Add(time.Duration(i)*time.Second)))
			}
			at := t0.Add(40 * time.Second)
			for _, i := range tc.reread {
				d := deliveryOf(ss, i, "b1", at)
				d.Redelivered = "true"
				m.pending = append(m.pending, d)
				at = at.Add(time.Second)
			}
			now := at.Add(holdBack + time.Second)
			if tc.rewound {
				now = now.Add(livenessBound)
			}
			judgeLiveness(t, m, now, tc.breach, tc.drains)
		})
	}
}

// A child waits while its parents are read again from their start after a
// wipe (seed 8's hour, 2026-12-04: soak-a/shardId-000000000025 behind its
// lineage for 4.5 minutes). Its own front stands still, but it is not
// stuck while an ancestor's front moves; once no ancestor moves either,
// it is.
func TestLivenessLetsAChildWaitWhileItsLineageIsReadAgain(t *testing.T) {
	t0 := time.Now()
	const (
		grand  = "soak-a/shardId-000000000000"
		parent = "soak-a/shardId-000000000002"
		child  = "soak-a/shardId-000000000005"
	)
	for _, tc := range []struct {
		name string
		// reread is the shard read again, one record a second from
		// t0+40s, after the first pass delivered everything but the
		// child's last records.
		reread string
		breach bool
	}{
		{"the grandparent is read again", grand, false},
		{"the parent is read again", parent, false},
		{"nothing of the lineage moves", "", true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s, m := streamsSoak(t0)
			s.active, s.quiet = map[string]int{}, map[string]time.Time{"": t0}
			shards := map[string]*shadowShard{}
			for _, id := range []string{grand, parent, child} {
				shards[id] = shadowOf(m, id, 5, t0)
			}
			shards[parent].parents = []string{grand}
			shards[child].parents = []string{parent, "soak-a/shardId-000000000001"}
			at := t0
			for _, id := range []string{grand, parent, child} {
				n := 5
				if id == child {
					n = 2 // 3 records left when the wipe came
				}
				for i := range n {
					m.pending = append(m.pending, deliveryOf(shards[id], i, "a1", at))
					at = at.Add(100 * time.Millisecond)
				}
			}
			at = t0.Add(40 * time.Second)
			if tc.reread != "" {
				for i := range 5 {
					d := deliveryOf(shards[tc.reread], i, "b1", at)
					d.Redelivered = "true"
					m.pending = append(m.pending, d)
					at = at.Add(time.Second)
				}
			}
			now := at.Add(holdBack + time.Second)
			judgeLiveness(t, m, now, tc.breach, !tc.breach)
		})
	}
}

// judgeLiveness takes in the monitor's pending deliveries at now, checks
// liveness, and asserts one breach (or none) and whether the drain waits.
func judgeLiveness(t *testing.T, m *monitor, now time.Time, breach, drains bool) {
	t.Helper()
	m.deliveries(now, false)
	m.liveness(now)
	if breach {
		assert.Equal(t, 1, m.v.Liveness, "a stuck shard breaks liveness")
	} else {
		assert.Zero(t, m.v.Liveness, "a shard that moves, or waits for a lineage that moves, is live")
	}
	assert.Equal(t, drains, m.draining(now), "the drain waits while a shard or its lineage moves")
}
