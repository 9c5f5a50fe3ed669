package chaos

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
)

// TestSoakFencingFlagsADeliveryUnderAnotherOwnersLease: a delivery of a
// shard by one instance while the lease samples on both sides show another
// instance holding it under one token breaks the fencing invariant; one
// across a take (the token changed), a wipe, its own lease, or within the
// slack after the earlier sample does not, nor one during its own pause.
func TestSoakFencingFlagsADeliveryUnderAnotherOwnersLease(t *testing.T) {
	t0 := time.Now()
	at := func(s float64) time.Time { return t0.Add(time.Duration(s * float64(time.Second))) }
	sample := func(s float64, owner int, token int64, gen int) leaseSample {
		return leaseSample{from: at(s), to: at(s + 0.01), owner: owner, token: token, gen: gen}
	}
	const shard = "soak-a/shardId-000000000000"
	cases := []struct {
		name    string
		samples []leaseSample
		d       Delivery
		pause   bool
		breach  bool
	}{
		{"another owner held it on both sides", []leaseSample{sample(0, 200, 5, 0), sample(2, 200, 5, 0), sample(4, 200, 5, 0), sample(6, 200, 5, 0)}, Delivery{Inst: "a1", At: at(5)}, false, true},
		{"its own lease", []leaseSample{sample(0, 100, 5, 0), sample(2, 100, 5, 0), sample(4, 100, 5, 0), sample(6, 100, 5, 0)}, Delivery{Inst: "a1", At: at(5)}, false, false},
		{"taken in between", []leaseSample{sample(0, 200, 5, 0), sample(2, 200, 5, 0), sample(4, 200, 6, 0), sample(6, 200, 6, 0)}, Delivery{Inst: "a1", At: at(5)}, false, false},
		{"a wipe in between", []leaseSample{sample(0, 200, 5, 0), sample(2, 200, 5, 0), sample(4, 200, 5, 1), sample(6, 200, 5, 1)}, Delivery{Inst: "a1", At: at(5)}, false, false},
		{"within the slack of the earlier sample", []leaseSample{sample(4, 0, 5, 0), sample(4.5, 200, 6, 0), sample(6, 200, 6, 0)}, Delivery{Inst: "a1", At: at(5)}, false, false},
		{"free before", []leaseSample{sample(0, 0, 5, 0), sample(2, 0, 5, 0), sample(4, 200, 6, 0), sample(6, 200, 6, 0)}, Delivery{Inst: "a1", At: at(5)}, false, false},
		{"during its own pause", []leaseSample{sample(0, 200, 5, 0), sample(2, 200, 5, 0), sample(4, 200, 5, 0), sample(6, 200, 5, 0)}, Delivery{Inst: "a1", At: at(5)}, true, false},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			s := &soak{runner: &runner{logf: func(string, ...any) {}}, incPids: map[string]int{"a1": 100}}
			if tc.pause {
				s.windows = append(s.windows, Window{What: "pause a1", From: at(3), To: at(8)})
			}
			m := newMonitor(s)
			tc.d.Shard = shard
			m.fence.samples[shard] = tc.samples
			m.fence.queue = []Delivery{tc.d, {Inst: "a1", Shard: shard, At: at(7)}}
			m.fenced()
			assert.Equal(t, tc.breach, m.v.FenceBreaches == 1, m.v.First)
			assert.Equal(t, 1, m.fence.judged)
			assert.Len(t, m.fence.queue, 1, "a delivery with no sample after it waits")
		})
	}
}
