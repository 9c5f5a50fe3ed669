package main

import (
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// Guards the rolling restart's verdicts: a key read backwards within one
// process's output is an order break, a line read twice a duplicate, and
// the interleaving across processes (unknown) is not judged.
func TestScaleReadKeyedCountsOrderBreaksAndDuplicates(t *testing.T) {
	dir := t.TempDir()
	write := func(name, body string) string {
		p := filepath.Join(dir, name)
		require.NoError(t, os.WriteFile(p, []byte(body), 0o600))
		return p
	}
	a := &scaleProc{outs: []string{write("a1", "k-1 0\nk-1 1\nk-2 0\nk-1 3\nk-1 2\n"), write("a2", "k-2 1\n")}}
	// b read k-1 from 2 on after a's hand-off: a duplicate of a's 2 and 3,
	// not an order break; its last line has no newline yet and is left out.
	b := &scaleProc{outs: []string{write("b1", "k-1 2\nk-1 3\nk-1 4\nk-1 5")}}
	r, err := readKeyed([]*scaleProc{a, b})
	require.NoError(t, err)
	assert.Equal(t, 1, r.orderBroken, "k-1 2 after k-1 3 in a1")
	assert.Equal(t, 2, r.seen["k-1 2"])
	assert.Equal(t, 2, r.seen["k-1 3"])
	assert.Equal(t, 1, r.seen["k-1 4"])
	assert.Zero(t, r.seen["k-1 5"], "a line still being written is not read")
}

// Guards the idle figures: the replicas' REPLCONF and the bench's INFO are
// not the inputs' commands, and one INFO per reading is taken off a node's
// total.
func TestScaleDiffNodesLeavesOutReplconfAndInfo(t *testing.T) {
	a := []nodeStats{{addr: "m", role: "master", total: 100, cmds: map[string]int64{"evalsha": 10, "hset": 40, "replconf": 20, "info": 5}}}
	b := []nodeStats{{addr: "m", role: "master", total: 100 + 30 + 60 + 12 + 1, cmds: map[string]int64{"evalsha": 40, "hset": 100, "replconf": 32, "info": 6}}}
	d := diffNodes(a, b)
	assert.Equal(t, int64(90), d.masterTotal(), "30 evalsha + 60 hset")
	assert.Equal(t, int64(30), d.masterScripts())
	assert.Equal(t, map[string]int64{"evalsha": 30, "hset": 60}, d.masterCmds())
}

// Guards the balance verdict: every shard owned and every process within
// one shard of its share.
func TestScaleBalancedWantsEveryShardOwnedAndShares(t *testing.T) {
	procs := []*scaleProc{{owner: "a"}, {owner: "b"}, {owner: "c"}}
	view := func(owners ...string) leaseView {
		v := leaseView{owner: map[string]string{}}
		for i, o := range owners {
			v.owner[string(rune('0'+i))] = o
		}
		return v
	}
	assert.True(t, view("a", "a", "b", "b", "c", "c", "a").balanced(procs, 7), "3, 2, 2 of 7")
	assert.False(t, view("a", "a", "a", "a", "b", "c", "c").balanced(procs, 7), "4, 1, 2 of 7")
	assert.False(t, view("a", "a", "b", "b", "c", "c", "").balanced(procs, 7), "a shard unowned")
	assert.False(t, view("a", "a", "b", "b", "c", "c").balanced(procs, 7), "a shard with no lease at all")
}

// Guards the end of a rolling restart's step: not before the restarted
// process is back (every shard owned, some by it); then at once when the
// group is balanced by count, or, under lease.balance load, once no lease
// has changed hands for the quiet time, counted from the last move or
// from the return, whichever is later.
func TestScaleStepSettlesBalancedOrQuiet(t *testing.T) {
	a, b := &scaleProc{owner: "a"}, &scaleProc{owner: "b"}
	view := func(owners ...string) leaseView {
		v := leaseView{owner: map[string]string{}}
		for i, o := range owners {
			v.owner[fmt.Sprintf("s%d", i)] = o
		}
		return v
	}
	s := &stepWatch{proc: b, procs: []*scaleProc{a, b}, total: 4, quiet: 20 * time.Second}
	assert.False(t, s.settled(view("a", "a", "a", ""), 1*time.Second), "a shard unowned")
	assert.False(t, s.settled(view("a", "a", "a", "a"), 2*time.Second), "b owns nothing yet")
	assert.False(t, s.settled(view("a", "a", "a", "b"), 3*time.Second), "back, 3 against 1")
	assert.Equal(t, 3*time.Second, s.back)
	assert.False(t, s.settled(view("a", "a", "a", "b"), 22*time.Second), "quiet for 19 s only")
	assert.True(t, s.settled(view("a", "a", "a", "b"), 23*time.Second), "quiet for 20 s")
	assert.True(t, s.byQuiet)

	s = &stepWatch{proc: b, procs: []*scaleProc{a, b}, total: 4, quiet: 20 * time.Second}
	assert.False(t, s.settled(view("a", "a", "a", "b"), 1*time.Second))
	assert.False(t, s.settled(view("a", "a", "b", "a"), 15*time.Second), "a move restarts the quiet time")
	assert.False(t, s.settled(view("a", "a", "b", "a"), 30*time.Second))
	assert.True(t, s.settled(view("a", "b", "b", "a"), 31*time.Second), "balanced by count")
	assert.False(t, s.byQuiet)
}
