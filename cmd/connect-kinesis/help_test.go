package main

import (
	"os/exec"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// Guards issue 60 item 11: `--help` did not list -c, which the README runs
// configs with (Benthos hides its root flags).
func TestHelpListsTheConfigFlag(t *testing.T) {
	t.Parallel()
	out, err := exec.CommandContext(t.Context(), binary, "--help").CombinedOutput()
	require.NoError(t, err, "%s", out)
	assert.Contains(t, string(out), "-c, --config FILE", "--help names -c:\n%s", out)
	assert.Contains(t, string(out), "connect-kinesis -c ./config.yaml", "--help shows a run with -c:\n%s", out)
}
