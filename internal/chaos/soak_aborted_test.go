package chaos

import (
	"bytes"
	"context"
	"errors"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/connect-kinesis/connect-kinesis/internal/testenv"
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

// A soak that ends early (here: no instance can start) keeps what the
// emulator and Redis printed in its folder, beside the instances' logs, so
// that a run the servers broke can be read afterwards.
func TestSoakKeepsWhatTheServersPrinted(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	var out bytes.Buffer
	_, err := RunSoak(t.Context(), SoakConfig{Binary: "/nonexistent/connect-kinesis", Dir: dir, Seed: 9, Duration: time.Minute, Classes: []string{ClassKill}, Out: &out})
	if errors.Is(err, testenv.ErrNotInstalled) {
		testenv.Require(t, "the soak's servers", err)
	}
	require.Error(t, err, "no instance can start")
	redis, err := os.ReadFile(filepath.Join(dir, "redis-server.log"))
	require.NoError(t, err)
	assert.Contains(t, string(redis), "Ready to accept connections", "Redis's own log")
	_, err = os.Stat(filepath.Join(dir, testenv.KindKinesisMock+".log"))
	assert.NoError(t, err, "the emulator's output, empty when it warned of nothing")
}
