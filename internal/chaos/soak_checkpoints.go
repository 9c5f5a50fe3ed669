package chaos

import (
	"context"
	"math/big"
	"strings"
	"time"

	"github.com/connect-kinesis/connect-kinesis/internal/consumer"
)

// checkpoints polls each stream's checkpoint hash: no checkpoint may move
// backwards. A wipe (the store forgot) starts the comparison afresh, and so
// does the clear of a stream found deleted and created again: the creation
// time the group's checkpoints belong to changes, and the shards are read
// from the start by design. A reader that started on the deleted stream
// reads the new one's records by its name until its instance sees the new
// creation time, so checkpoints of the new stream exist before that clear
// (seed 12 with efo: a35 committed soak-dyn-2#15's shard 1 up to its 8th
// record of one key, then c23 cleared it and the shard was read again from
// its first record, marked; the check called it a regression). The
// creation time is read before and after the checkpoints: a clear between
// the two leaves the stream out of this poll.
func (m *monitor) checkpoints(ctx context.Context) {
	m.s.smu.Lock()
	if m.s.wiped {
		clear(m.cps)
		m.s.wiped = false
	}
	gen := m.s.wipes
	m.s.smu.Unlock()
	for _, st := range m.s.liveStreams() {
		cctx, cancel := context.WithTimeout(ctx, time.Second)
		before, err := st.store.RecordedStreamCreated(cctx)
		var cps map[string]consumer.Position
		if err == nil {
			cps, err = st.store.Checkpoints(cctx)
		}
		var after time.Time
		if err == nil {
			after, err = st.store.RecordedStreamCreated(cctx)
		}
		cancel()
		if err != nil {
			continue // Redis is down or paused: that is a fault, not a regression
		}
		m.s.smu.Lock()
		forgot := m.s.wipes != gen
		m.s.smu.Unlock()
		if forgot {
			// The store forgot while this poll ran (a wipe, or a
			// promotion that lost the lag's commits): the next poll
			// starts afresh.
			return
		}
		if !before.Equal(after) {
			continue // cleared while read: the next poll judges
		}
		if prev, ok := m.created[st.label]; ok && !prev.Equal(after) {
			for id := range m.cps {
				if strings.HasPrefix(id, st.label+"/") {
					delete(m.cps, id)
				}
			}
		}
		m.created[st.label] = after
		for shard, p := range cps {
			id := st.label + "/" + shard
			if st.dyn && !m.ofIncarnation(id, p) {
				// A checkpoint of the name's deleted incarnation, until
				// the new one's first take clears it.
				continue
			}
			prev, ok := m.cps[id]
			if ok && positionBefore(p, prev) {
				m.v.Regressions++
				m.fail("checkpoint regression", "%s went from %s to %s", id, prev, p)
			}
			m.cps[id] = p
		}
	}
}

// positionBefore says whether p is strictly before q.
func positionBefore(p, q consumer.Position) bool {
	if q.ShardEnd {
		return !p.ShardEnd
	}
	if p.ShardEnd {
		return false
	}
	a, _ := new(big.Int).SetString(p.Sequence, 10)
	b, _ := new(big.Int).SetString(q.Sequence, 10)
	if a == nil || b == nil {
		return false
	}
	if c := a.Cmp(b); c != 0 {
		return c < 0
	}
	return p.HasSub && q.HasSub && p.SubSequence < q.SubSequence
}
