package coordinator

import (
	"context"
	"maps"
	"strings"
	"sync"
	"time"

	"github.com/connect-kinesis/connect-kinesis/internal/consumer"
)

// Balancing across streams. Each stream has its own coordinator, leases
// and members, so a round sees one stream. Shares taken stream by stream
// are not fair when streams are small: with a hundred streams of one shard
// and four members, each stream's share is one shard, every member that
// holds one is at its share, and whoever took first keeps them all. So
// each coordinator publishes what its round saw in the consumer's tally
// (the stream's ready shards, how many each member holds, and each
// member's bytes/s when it balances by load), and a round adds the other
// streams' figures to its own: the shares, the floor a member keeps and
// the loads planLoadHandOffs evens out are then taken over every shard of
// every stream. Only streams read by the same members add up (their
// member lists are equal); a stream some members do not read yet (an
// instance that has not found it, or configured differently) is balanced
// alone, as before. With one stream the tally adds nothing.
//
// The shared rounds hand every stream's round to its run loop at once.
// Rounds run concurrently would each read the tally before the others
// wrote it back, and each take its stream's part of this instance's
// shortfall as if alone: after a failover a survivor took every stream's
// orphan and ended above the others, who asked it for its own shards. So
// the rounds of one consumer's streams take turns (tally.turn): each reads
// the tally as the round before it left it. Asks still reach the holders
// a round later, so hand-offs asked for by count in the last
// askPendingRounds rounds of other streams count against the shortfall,
// and by load only one stream of a set asks while any of them settles.

// askPendingRounds is how many balancing rounds a hand-off asked for by
// count counts against the shortfall in the other streams' rounds: the
// holder's round, its reader's release and the taker's round.
const askPendingRounds = 3

// tally is the consumer's view of the group across its streams.
type tally struct {
	mu      sync.Mutex
	streams map[string]streamTally // by stream identity (coordinator.id)
	// turn holds a token while one of the streams' rounds runs (take).
	turn chan struct{}
}

// take waits for this round's turn among the consumer's streams, until ctx
// ends; it returns the function that ends the turn, or nil when ctx ended
// first (the round is skipped, as one whose read failed).
func (t *tally) take(ctx context.Context) func() {
	t.mu.Lock()
	if t.turn == nil {
		t.turn = make(chan struct{}, 1)
	}
	ch := t.turn
	t.mu.Unlock()
	select {
	case ch <- struct{}{}:
		return func() { <-ch }
	case <-ctx.Done():
		return nil
	}
}

// streamTally is one stream as its coordinator's last round saw it.
type streamTally struct {
	members string           // the live members, sorted and joined
	ready   int              // shards ready to be read
	held    map[string]int   // live member -> ready shards it holds
	loads   map[string]int64 // live member -> bytes/s; nil unless the round balanced by load
	// asked is when and how many hand-offs this instance last asked for
	// by count; settling, that it asked by load or a shard it watches
	// moved within the cool-down.
	askedAt  time.Time
	asked    int
	settling bool
}

// elsewhere is what the other streams read by the same members add up to.
type elsewhere struct {
	ready    int
	held     map[string]int
	loads    map[string]int64
	asked    int  // hand-offs this instance asked for lately, by count
	settling bool // a hand-off by load is under way
}

func memberKey(members []string) string { return strings.Join(members, "\x00") }

// set records a stream's round.
func (t *tally) set(id string, st streamTally) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.streams == nil {
		t.streams = map[string]streamTally{}
	}
	t.streams[id] = st
}

// drop forgets a stream this instance no longer reads.
func (t *tally) drop(id string) {
	t.mu.Lock()
	defer t.mu.Unlock()
	delete(t.streams, id)
}

// others adds up the streams other than id read by exactly members.
// pending is how long a hand-off asked for by count is still on its way.
func (t *tally) others(id string, members []string, pending time.Duration) elsewhere {
	key := memberKey(members)
	t.mu.Lock()
	defer t.mu.Unlock()
	e := elsewhere{held: map[string]int{}, loads: map[string]int64{}}
	for sid, st := range t.streams {
		if sid == id || st.members != key {
			continue
		}
		e.ready += st.ready
		for m, n := range st.held {
			e.held[m] += n
		}
		for m, x := range st.loads {
			e.loads[m] += x
		}
		if time.Since(st.askedAt) < pending {
			e.asked += st.asked
		}
		e.settling = e.settling || st.settling
	}
	return e
}

// heldCounts is how many ready shards each holder holds: the others as
// their live leases say, this instance the shards it reads (mine).
func heldCounts(ready []string, leases map[string]consumer.LeaseState, self string, mine int) map[string]int {
	held := map[string]int{}
	for _, id := range ready {
		ls, ok := leases[id]
		if !ok || ls.Expired || ls.Owner == "" || ls.Owner == self {
			continue
		}
		held[ls.Owner]++
	}
	held[self] = mine
	return held
}

// memberLoads sums a load view's bytes/s by member.
func memberLoads(v loadView) map[string]int64 {
	out := map[string]int64{}
	for shard, o := range v.owners {
		out[o] += v.rates[shard]
	}
	return out
}

// addHeld returns a + b, member by member.
func addHeld(a, b map[string]int) map[string]int {
	out := maps.Clone(a)
	if out == nil {
		out = map[string]int{}
	}
	for m, n := range b {
		out[m] += n
	}
	return out
}
