package chaos

import (
	"strings"
	"time"

	"github.com/connect-kinesis/connect-kinesis/internal/consumer"
)

// readFront is where a shard is being read: the position of its latest
// delivery (or dead letter), in the order of the stamps, and when a
// delivery last moved it forward.
//
// A shard whose checkpoint a Redis wipe took while no live instance held
// it is read again from its start (the mark's and the checkpoint's limit
// without persistence): its oldest undelivered record then waits behind
// the whole shard read again. soak-big's 96 KiB records made that a
// 190 MB backlog in seed 5's hour (2026-12-03, the sixth attempt): its
// reader moved on all the while, 150 to 850 records a minute, and the
// run counted 22 liveness breaches and 2,306 records lost only because
// the oldest undelivered record was still behind it when the drain's
// two minutes were over. Liveness is about a shard that is stuck, so a
// shard whose front, or an ancestor's, moved within livenessBound is not
// breached, and the drain goes on while such a shard moves (drainMax).
type readFront struct {
	last  consumer.Position
	moved time.Time
}

// drainMax bounds the drain of a shard read again from its start.
const drainMax = 15 * time.Minute

// advance notes d, a delivery or dead letter of its shard.
func (m *monitor) advance(d Delivery) {
	p, err := consumer.ParsePosition(d.Seq)
	if err != nil {
		return
	}
	if m.fronts == nil {
		m.fronts = map[string]*readFront{}
	}
	f := m.fronts[d.Shard]
	if f == nil {
		m.fronts[d.Shard] = &readFront{last: p, moved: d.At}
		return
	}
	if p.Compare(f.last) > 0 && d.At.After(f.moved) {
		f.moved = d.At
	}
	f.last = p
}

// moving says whether shard's read front, or that of one of its
// ancestors, moved forward within livenessBound of now. A child is read
// only once its parents are read to their end, so after a wipe a child
// waits while its whole lineage is read again from the start, which may
// take minutes while every ancestor moves on: seed 8's hour (2026-12-04,
// on 6db72ec) broke liveness on soak-a/shardId-000000000025 4.5 minutes
// after Redis wipes while soak-a's older shards, shardId-000000000000
// first, were delivered again one after another; it was read on as soon
// as its parents were.
func (m *monitor) moving(shard string, now time.Time) bool {
	seen := map[string]bool{}
	var walk func(id string) bool
	walk = func(id string) bool {
		if seen[id] {
			return false
		}
		seen[id] = true
		if f := m.fronts[id]; f != nil && now.Sub(f.moved) <= livenessBound {
			return true
		}
		if ss := m.sh.shards[id]; ss != nil {
			for _, p := range ss.parents {
				if walk(p) {
					return true
				}
			}
		}
		return false
	}
	return walk(shard)
}

// draining says whether a shard with records still to deliver is
// moving: the drain waits for it (up to drainMax).
func (m *monitor) draining(now time.Time) bool {
	gone := m.goneLabels()
	for _, ss := range m.sh.shards {
		if label, _, _ := strings.Cut(ss.id, "/"); gone[label] || ss.next >= len(ss.recs) {
			continue
		}
		if m.moving(ss.id, now) {
			return true
		}
	}
	return false
}
