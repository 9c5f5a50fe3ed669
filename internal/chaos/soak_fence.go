package chaos

import (
	"context"
	"sort"
	"strconv"
	"strings"
	"time"
)

// The fencing invariant: an instance writes nothing for a shard another
// owner held at that moment. Every check reads each stream's leases (owner,
// fencing token, live or not, by Redis TIME); a delivery of shard S by
// incarnation I is a breach when the samples on both sides of it show one
// other instance holding S's live lease under one token, with no wipe in
// between. A delivery's time is when the pipeline's mapping stamped it, a
// little after the input handed it over; so the earlier sample must be
// fenceSlack before it, and only incarnations whose output is a plain file
// are judged (a slow output's sleeping pipeline threads can hold a batch
// back for seconds before its mapping runs), and none during or just after
// a pause of its own (a batch handed over before SIGSTOP is stamped after
// SIGCONT).
const fenceSlack = 2 * time.Second

// leaseSample is one read of one shard's lease: taken between from and to.
type leaseSample struct {
	from, to time.Time
	owner    int // pid of the live owner; 0 when none holds it
	token    int64
	gen      int // wipes before the read
}

type fence struct {
	samples map[string][]leaseSample // stream/shard -> in time order
	queue   []Delivery               // plain-output deliveries not yet judged
	judged  int
}

// pidOfOwner reads the pid out of an instance id (host-pid-suffix).
func pidOfOwner(owner string) int {
	parts := strings.Split(owner, "-")
	if len(parts) < 3 {
		return 0
	}
	pid, _ := strconv.Atoi(parts[len(parts)-2])
	return pid
}

// sampleLeases reads every stream's leases once.
func (m *monitor) sampleLeases(ctx context.Context) {
	m.s.smu.Lock()
	gen := m.s.wipes
	m.s.smu.Unlock()
	for _, st := range m.s.liveStreams() {
		from := time.Now()
		lctx, cancel := context.WithTimeout(ctx, time.Second)
		leases, err := st.store.Leases(lctx)
		cancel()
		if err != nil {
			continue // Redis down or paused: no sample
		}
		to := time.Now()
		for shard, l := range leases {
			ls := leaseSample{from: from, to: to, token: l.Token, gen: gen}
			if !l.Expired {
				ls.owner = pidOfOwner(l.Owner)
			}
			id := st.label + "/" + shard
			m.fence.samples[id] = append(m.fence.samples[id], ls)
		}
	}
}

// fenced judges the queued deliveries that have a lease sample after them;
// the others wait for a later check (at the end, they are left unjudged).
func (m *monitor) fenced() {
	m.s.mu.Lock()
	pids := make(map[string]int, len(m.s.incPids))
	for k, v := range m.s.incPids {
		pids[k] = v
	}
	var pauses []Window
	for _, w := range m.s.windows {
		if strings.HasPrefix(w.What, "pause ") {
			pauses = append(pauses, w)
		}
	}
	m.s.mu.Unlock()
	keep := m.fence.queue[:0]
	for _, d := range m.fence.queue {
		ss := m.fence.samples[d.Shard]
		// b: the first sample read wholly after the delivery.
		b := sort.Search(len(ss), func(i int) bool { return !ss[i].from.Before(d.At) })
		if b == len(ss) {
			keep = append(keep, d)
			continue
		}
		m.fence.judged++
		paused := false
		for _, w := range pauses {
			if w.What == "pause "+d.Inst && !d.At.Before(w.From) && !d.At.After(w.To) {
				paused = true
				break
			}
		}
		if paused {
			continue
		}
		// a: the last sample read wholly fenceSlack before it.
		a := sort.Search(len(ss), func(i int) bool { return !ss[i].to.Before(d.At.Add(-fenceSlack)) }) - 1
		if a < 0 {
			continue
		}
		held := ss[a].owner != 0 && ss[a].owner != pids[d.Inst]
		for i := a + 1; held && i <= b; i++ {
			held = ss[i].owner == ss[a].owner && ss[i].token == ss[a].token && ss[i].gen == ss[a].gen
		}
		if held {
			m.v.FenceBreaches++
			m.fail("fencing", "%s delivered %s/%d of %s at %s while pid %d held its lease (token %d) from %s to %s",
				d.Inst, d.K, d.C, d.Shard, m.s.at(d.At), ss[a].owner, ss[a].token, m.s.at(ss[a].to), m.s.at(ss[b].from))
		}
	}
	m.fence.queue = keep
}
