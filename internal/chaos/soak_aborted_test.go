package chaos

import (
	"bytes"
	"context"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// A soak that cannot be carried out (here: interrupted before its
// emulator started) still ends its report with a verdict line, FAIL, that
// says why, rather than printing none.
func TestSoakThatCannotBeCarriedOutEndsWithAFailLine(t *testing.T) {
	ctx, cancel := context.WithCancel(t.Context())
	cancel()
	var out bytes.Buffer
	_, err := RunSoak(ctx, SoakConfig{Binary: "/nonexistent/connect-kinesis", Dir: t.TempDir(), Seed: 9, Duration: time.Minute, Classes: []string{ClassKill}, Out: &out})
	require.Error(t, err)
	lines := strings.Split(strings.TrimSpace(out.String()), "\n")
	last := lines[len(lines)-1]
	assert.True(t, strings.HasPrefix(last, "soak: seed=9 duration=1m0s verdict=FAIL carried_out=false error="), "last line: %q", last)
	assert.Contains(t, last, strconv.Quote(err.Error()), "the line names why")
}
