package kinesisx

import (
	"fmt"
	"testing"
	"testing/synctest"
	"time"
)

// mostInASecond is the largest number of the times at that fall within
// one second of each other (at is in ascending order).
func mostInASecond(at []time.Duration) int {
	most, lo := 0, 0
	for hi := range at {
		for at[hi]-at[lo] >= time.Second {
			lo++
		}
		most = max(most, hi-lo+1)
	}
	return most
}

// A Pace idle for a while stays within the account's limit when calls come
// again. A time.Ticker whose ticks nobody took delivers one of them at
// once to the next receiver (Go 1.23's timer channels), and its next tick
// keeps the ticker's phase, so it may come a moment later; a new Pace adds
// its first permit to both. ListStreams and ListTagsForStream, 5/s for the
// account, then see 6 or 7 calls within one second, DescribeStreamSummary
// (20/s) 21.
func TestPaceKeepsTheLimitAfterIdle(t *testing.T) {
	for _, perSecond := range []int{MaxListTagsForStreamPerSecond, MaxDescribeStreamSummaryPerSecond} {
		interval := time.Second * 11 / 10 / time.Duration(perSecond)
		for _, used := range []bool{false, true} {
			t.Run(fmt.Sprintf("perSecond=%d/used=%v", perSecond, used), func(t *testing.T) {
				synctest.Test(t, func(t *testing.T) {
					made := time.Now()
					p := NewPace(perSecond)
					if used {
						for range 2 {
							if err := p.Wait(t.Context()); err != nil {
								t.Fatal(err)
							}
						}
					}
					// Idle until a millisecond before one of the ticker's ticks.
					time.Sleep(time.Until(made.Add(20*interval - time.Millisecond)))
					start := time.Now()
					var at []time.Duration
					for time.Since(start) < 2*time.Second {
						if err := p.Wait(t.Context()); err != nil {
							t.Fatal(err)
						}
						at = append(at, time.Since(start))
					}
					if n := mostInASecond(at); n > perSecond {
						t.Errorf("%d calls within one second (limit %d/s): %v", n, perSecond, at[:min(len(at), 8)])
					}
				})
			})
		}
	}
}
