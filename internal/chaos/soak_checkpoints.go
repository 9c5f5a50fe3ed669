package chaos

import (
	"context"
	"math/big"
	"time"

	"github.com/connect-kinesis/connect-kinesis/internal/consumer"
)

// checkpoints polls each stream's checkpoint hash: no checkpoint may move
// backwards. A wipe (the store forgot) starts the comparison afresh.
func (m *monitor) checkpoints(ctx context.Context) {
	m.s.smu.Lock()
	if m.s.wiped {
		clear(m.cps)
		m.s.wiped = false
	}
	m.s.smu.Unlock()
	for _, st := range m.s.liveStreams() {
		cctx, cancel := context.WithTimeout(ctx, time.Second)
		cps, err := st.store.Checkpoints(cctx)
		cancel()
		if err != nil {
			continue // Redis is down or paused: that is a fault, not a regression
		}
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
