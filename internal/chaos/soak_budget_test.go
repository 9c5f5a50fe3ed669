package chaos

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/connect-kinesis/connect-kinesis/internal/consumer/budget"
)

// TestSoakFailsOnABudgetWaitWarning: an instance's warning that a shard
// waited for the byte budget past the bound breaks the invariant, once per
// warning and whether the line came in one read or two; other warnings do
// not.
func TestSoakFailsOnABudgetWaitWarning(t *testing.T) {
	dir := t.TempDir()
	out := filepath.Join(dir, "a1.jsonl")
	s := &soak{runner: &runner{outputs: []string{out}, logf: func(string, ...any) {}}}
	m := newMonitor(s)
	log := filepath.Join(dir, "a1.log")
	write := func(text string) {
		f, err := os.OpenFile(log, os.O_CREATE|os.O_APPEND|os.O_WRONLY, 0o600)
		require.NoError(t, err)
		_, err = f.WriteString(text)
		require.NoError(t, err)
		require.NoError(t, f.Close())
	}

	write(`time="x" level=warning msg="Renewing leases failed; retrying"` + "\n")
	require.NoError(t, m.budgetWaits())
	assert.Zero(t, m.v.BudgetWaits)
	assert.Empty(t, m.v.First, "no invariant broken yet")

	write(`time="x" level=warning msg="The input's byte budget (max_buffered_bytes 524288) has held shards back for 31s, longer than`)
	require.NoError(t, m.budgetWaits())
	assert.Zero(t, m.v.BudgetWaits, "half a line waits for its end")
	write(` lag_warn_threshold (30s): 2 shards wait"` + "\n")
	require.NoError(t, m.budgetWaits())
	assert.Equal(t, 1, m.v.BudgetWaits)
	assert.Contains(t, m.v.First, "budget wait: a1: no fault withheld its deliveries during the wait, and its output has no slow step: msg=")
	require.NoError(t, m.budgetWaits())
	assert.Equal(t, 1, m.v.BudgetWaits, "a line is counted once")
}

// A wait behind calls Kinesis did not answer is counted apart and noted,
// not a breach: the pipeline acked all along.
func TestSoakCountsABudgetWaitBehindUnansweredCallsApart(t *testing.T) {
	dir := t.TempDir()
	out := filepath.Join(dir, "b16.jsonl")
	var notes []string
	s := &soak{runner: &runner{outputs: []string{out}, logf: func(f string, a ...any) { notes = append(notes, fmt.Sprintf(f, a...)) }}}
	m := newMonitor(s)
	line := `time="x" level=warning msg="The input's byte budget (max_buffered_bytes 2097152) has held shards back for 30s, longer than lag_warn_threshold (30s): 4 shards wait to fetch while 1600000 bytes are held, 1100000 of them reserved for calls to Kinesis that have not answered yet. Kinesis answers slowly or not at all"` + "\n"
	require.NoError(t, os.WriteFile(filepath.Join(dir, "b16.log"), []byte(line), 0o600))
	require.NoError(t, m.budgetWaits())
	assert.Zero(t, m.v.BudgetWaits)
	assert.Equal(t, 1, m.v.BudgetWaitsOnKinesis)
	assert.Empty(t, m.v.First)
	assert.True(t, m.v.Pass())
	require.Len(t, notes, 1)
	assert.Contains(t, notes[0], "budget wait of b16 behind calls Kinesis did not answer")
}

// budgetWarningAt is the input's warning that the oldest shard had waited
// held, written at.
func budgetWarningAt(at time.Time, held time.Duration) string {
	return fmt.Sprintf(`time="%s" level=warning msg="The input's byte budget (max_buffered_bytes 2097152) has held shards back for %v, longer than lag_warn_threshold (30s): 5 shards wait to fetch while 2785765 bytes of records wait in the input or for the pipeline's acks. The pipeline is slower than the streams"`+"\n",
		at.UTC().Format(time.RFC3339), held)
}

func letInAt(at time.Time) string {
	return fmt.Sprintf(`time="%s" level=info msg="The input's byte budget %s: the longest wait was 38s, lag_warn_threshold 30s"`+"\n", at.UTC().Format(time.RFC3339), budget.LetInAgain)
}

// A warned wait is judged on its time outside the faults that withheld the
// instance's deliveries (seed 15 with efo: b19's shards waited 38 s, 17 s
// of them while Redis was emptied and then paused, during which its readers
// delivered nothing and kept their records' room). Within the bound
// outside them: counted apart and noted. Over it: a breach, naming the
// faults. The faults of another incarnation do not count.
func TestSoakJudgesABudgetWaitOnItsTimeOutsideWithholdingFaults(t *testing.T) {
	t0 := time.Now().Truncate(time.Second).Add(-38 * time.Second) // the wait's end is now
	cases := []struct {
		name      string
		held      []*withholding
		breach    bool
		noteParts []string
	}{
		{"a Redis wipe and pause in it", []*withholding{
			{what: "redis-empty", from: t0.Add(20 * time.Second), to: t0.Add(29 * time.Second)},
			{what: "redis-pause", from: t0.Add(29 * time.Second), to: t0.Add(37 * time.Second)},
		}, false, []string{"budget wait of b19: 38s, of which 17s under faults that withheld its deliveries (redis-empty, redis-pause) and up to 0s the slow output's pace for what was in the pipeline; 21s outside them"}},
		{"its own pause in it", []*withholding{{what: "pause b19", inst: "b19", from: t0.Add(10 * time.Second), to: t0.Add(20 * time.Second)}}, false, []string{"pause b19"}},
		{"another incarnation's pause", []*withholding{{what: "pause a3", inst: "a3", from: t0.Add(10 * time.Second), to: t0.Add(20 * time.Second)}}, true, nil},
		{"too little of it under faults", []*withholding{{what: "redis-stall", from: t0.Add(25 * time.Second), to: t0.Add(29 * time.Second)}}, true, nil},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			dir := t.TempDir()
			var notes []string
			running := &incarnation{name: "b19", child: &child{done: make(chan struct{})}}
			s := &soak{runner: &runner{outputs: []string{filepath.Join(dir, "b19.jsonl")}, logf: func(f string, a ...any) { notes = append(notes, fmt.Sprintf(f, a...)) },
				instances: map[string]*incarnation{"b": running}}, withholdings: c.held}
			m := newMonitor(s)
			// The oldest shard waits from t0; the warning at 30 s, the end at 38 s.
			log := budgetWarningAt(t0.Add(30*time.Second), 30*time.Second)
			require.NoError(t, os.WriteFile(filepath.Join(dir, "b19.log"), []byte(log), 0o600))
			require.NoError(t, m.budgetWaits())
			if !c.breach {
				assert.Empty(t, m.v.First, "a fault withheld part of the wait: judged at its end")
			}
			f, err := os.OpenFile(filepath.Join(dir, "b19.log"), os.O_APPEND|os.O_WRONLY, 0o600)
			require.NoError(t, err)
			_, err = f.WriteString(letInAt(t0.Add(38 * time.Second)))
			require.NoError(t, err)
			require.NoError(t, f.Close())
			require.NoError(t, m.budgetWaits())
			if c.breach {
				assert.Equal(t, 1, m.v.BudgetWaits)
				assert.Contains(t, m.v.First, "budget wait: b19: ")
				return
			}
			assert.Zero(t, m.v.BudgetWaits)
			assert.Equal(t, 1, m.v.BudgetWaitsExcused)
			assert.True(t, m.v.Pass())
			for _, p := range c.noteParts {
				assert.Contains(t, strings.Join(notes, "\n"), p)
			}
		})
	}
}

// A warned wait with no end line yet is judged at every check while its
// incarnation runs, up to the check (less the end line's possible lag):
// a shard still waiting past the bound outside the faults is a breach
// before the wait ends, or without an end if the process is killed later.
func TestSoakJudgesAWarnedWaitStillUnderWayAtEachCheck(t *testing.T) {
	dir := t.TempDir()
	now := time.Now().Truncate(time.Second)
	running := &incarnation{name: "b19", child: &child{done: make(chan struct{})}}
	s := &soak{runner: &runner{outputs: []string{filepath.Join(dir, "b19.jsonl")}, logf: func(string, ...any) {}, instances: map[string]*incarnation{"b": running}},
		// 10 s of Redis faults 40 s ago; the wait began 50 s ago.
		withholdings: []*withholding{{what: "redis-restart", from: now.Add(-40 * time.Second), to: now.Add(-30 * time.Second)}}}
	m := newMonitor(s)
	require.NoError(t, os.WriteFile(filepath.Join(dir, "b19.log"), []byte(budgetWarningAt(now.Add(-20*time.Second), 30*time.Second)), 0o600))
	require.NoError(t, m.budgetWaits())
	assert.Equal(t, 1, m.v.BudgetWaits, "50 s of waiting, 10 s of it under a Redis fault, and still no end")
	assert.Regexp(t, `budget wait: b19: waited 4[78]s by the time of this check, 3[78]s of it outside faults that withheld its deliveries \(redis-restart\) and the slow output's 0s for what was in the pipeline`, m.v.First)

	// The same wait of an incarnation no longer running is not judged past
	// its last check.
	m = newMonitor(s)
	close(running.done)
	require.NoError(t, m.budgetWaits())
	assert.Zero(t, m.v.BudgetWaits)
}

// A slow output's pipeline acks a batch only once its last message is
// through the slow step, so a wait behind a large batch in the pipeline
// lasts as long as the step needs for it (seed 15 with efo: y11, 7 ms a
// message, was handed one subscription event of 5,906 KPL user records,
// 6.4 MB, and its other 11 shards waited for it). The soak takes the most
// that step can need for the bytes the warning says were in the pipeline
// (at least budget.RecordOverhead a message) out of the wait, as it does
// faults that withhold deliveries. The same wait of an output with no slow
// step, or with nothing in the pipeline, is a breach.
func TestSoakWeighsABudgetWaitAgainstTheSlowOutputsPace(t *testing.T) {
	const inPipe = 6408052 // at most 6,408 messages: 44.9 s at 7 ms
	cases := []struct {
		name   string
		pace   time.Duration
		piped  int64
		breach bool
	}{
		{"a slow output, its batch in the pipeline", 7 * time.Millisecond, inPipe, false},
		{"a plain output", 0, inPipe, true},
		{"a slow output, nothing in the pipeline", 7 * time.Millisecond, 0, true},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			dir := t.TempDir()
			var notes []string
			running := &incarnation{name: "y11", child: &child{done: make(chan struct{})}}
			s := &soak{runner: &runner{outputs: []string{filepath.Join(dir, "y11.jsonl")}, logf: func(f string, a ...any) { notes = append(notes, fmt.Sprintf(f, a...)) },
				instances: map[string]*incarnation{"y": running}}, slowPace: map[string]time.Duration{"y11": c.pace}}
			m := newMonitor(s)
			// The oldest shard waits from 44 s ago; the warning at 30 s, and
			// at 44 s (now) the wait ends.
			t0 := time.Now().Truncate(time.Second).Add(-44 * time.Second)
			line := fmt.Sprintf(`time="%s" level=warning msg="The input's byte budget (max_buffered_bytes 2097152) has held shards back for 30s, longer than lag_warn_threshold (30s): 11 shards wait to fetch while 6408052 bytes of records wait in the input or for the pipeline's acks, %d of them handed to the pipeline. The pipeline is slower than the streams" %s=%d`+"\n",
				t0.Add(30*time.Second).UTC().Format(time.RFC3339), c.piped, budget.InPipelineField, c.piped)
			line += letInAt(t0.Add(44 * time.Second))
			require.NoError(t, os.WriteFile(filepath.Join(dir, "y11.log"), []byte(line), 0o600))
			require.NoError(t, m.budgetWaits())
			if c.breach {
				assert.Equal(t, 1, m.v.BudgetWaits)
				assert.Contains(t, m.v.First, "budget wait: y11: ")
				return
			}
			assert.Zero(t, m.v.BudgetWaits)
			assert.Equal(t, 1, m.v.BudgetWaitsExcused)
			assert.Contains(t, strings.Join(notes, "\n"), "budget wait of y11: 44s, of which 0s under faults that withheld its deliveries (none) and up to 44.856s the slow output's pace")
		})
	}
}
