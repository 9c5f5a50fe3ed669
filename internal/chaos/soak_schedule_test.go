package chaos

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func classesOn(cs ...string) map[string]bool {
	on := map[string]bool{}
	for _, c := range cs {
		on[c] = true
	}
	return on
}

// The same seed draws the same schedule; another seed another one.
func TestSoakScheduleReplaysFromItsSeed(t *testing.T) {
	on := classesOn(DefaultClasses()...)
	a := drawSchedule(42, 10*time.Minute, 3, on, 3*time.Second)
	b := drawSchedule(42, 10*time.Minute, 3, on, 3*time.Second)
	c := drawSchedule(43, 10*time.Minute, 3, on, 3*time.Second)
	require.NotEmpty(t, a)
	assert.Equal(t, a, b)
	assert.NotEqual(t, a, c)
	for _, e := range a {
		assert.Less(t, e.end(), 10*time.Minute, "%v ends after the load", e)
	}
}

// A class switched off is never drawn; without wipe-holder no instance
// fault overlaps a wipe.
func TestSoakScheduleHonoursItsClasses(t *testing.T) {
	lease := 3 * time.Second
	on := classesOn(DefaultClasses()...)
	delete(on, ClassKill)
	for seed := range uint64(20) {
		evs := drawSchedule(seed, 10*time.Minute, 3, on, lease)
		var wipes []soakEvent
		for _, e := range evs {
			assert.NotEqual(t, ClassKill, e.class)
			if e.class == ClassRedisEmpty || e.class == ClassRedisFlush {
				wipes = append(wipes, e)
			}
		}
		for _, e := range evs {
			if e.class != ClassTerm && e.class != ClassPause && e.class != ClassScale && e.class != ClassRedisCut {
				continue
			}
			for _, w := range wipes {
				overlap := e.at < w.end()+2*lease && e.end()+3*lease+2*time.Second > w.at
				assert.False(t, overlap, "seed %d: %v overlaps the wipe %v", seed, e, w)
			}
		}
	}
}

// Switching redis-cut or efo on adds its faults and leaves every other
// class's schedule of a seed as it was (with wipe-holder on, so that no
// clearance around wipes drops any), so seeds run before it replay.
func TestSoakScheduleRedisCutLeavesTheOthers(t *testing.T) {
	for _, class := range []string{ClassRedisCut, ClassEFO} {
		with := classesOn(SoakClasses()...)
		without := classesOn(SoakClasses()...)
		delete(without, class)
		for seed := range uint64(10) {
			a := drawSchedule(seed, time.Hour, 3, with, 3*time.Second)
			b := drawSchedule(seed, time.Hour, 3, without, 3*time.Second)
			var others []soakEvent
			added := 0
			for _, e := range a {
				if e.class == class {
					added++
					continue
				}
				others = append(others, e)
			}
			assert.Positive(t, added, "%s, seed %d", class, seed)
			assert.Equal(t, b, others, "%s, seed %d", class, seed)
		}
	}
}

// efo is asked for by name: the default classes leave it out, as they do
// wipe-holder and the failover classes (a replicated store), so the CI
// soaks read by polling through the fault proxy from one Redis.
func TestSoakDefaultClassesLeaveOutEFO(t *testing.T) {
	off := []string{ClassEFO, ClassWipeHolder, ClassFailoverAcked, ClassFailoverUnacked, ClassFailoverSentinelAcked, ClassFailoverSentinelUnacked,
		ClassFailoverClusterAcked, ClassFailoverClusterUnacked}
	for _, c := range off {
		assert.NotContains(t, DefaultClasses(), c)
	}
	assert.Len(t, DefaultClasses(), len(SoakClasses())-len(off))
}
