package chaos

import (
	"fmt"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
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
	assert.Contains(t, m.v.First, "budget wait: a1: msg=")
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
