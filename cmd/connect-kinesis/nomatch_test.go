package main

import (
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/connect-kinesis/connect-kinesis/internal/testenv"
)

// patternYAML reads the streams a pattern finds.
const patternYAML = `
logger:
  level: info
  format: logfmt
http:
  enabled: false
input:
  kinesis:
    streams: [ "%s" ]
    region: %s
    endpoint: %s
    credentials: { id: %s, secret: %s }
    checkpoint:
      redis: { url: %s }
      group: patterns
output:
  drop: {}
`

// Guards issue 60 item 3: with a pattern that matches nothing (a typo)
// the input looked healthy and the log said nothing. The user now sees a
// WARN naming the pattern and what /ready means meanwhile.
func TestIntegrationAPatternMatchingNothingIsWarned(t *testing.T) {
	t.Parallel()
	k := testenv.NewKinesisMock(t)
	r := testenv.NewRedis(t)
	k.MustCreateStream(t, "orders-eu", 1)
	dir := t.TempDir()
	conf := filepath.Join(dir, "typo.yaml")
	require.NoError(t, os.WriteFile(conf, []byte(fmt.Sprintf(patternYAML,
		"order-*", testenv.Region, k.Endpoint, testenv.AccessKey, testenv.SecretKey, r.URL())), 0o600))
	cmd, logf := startBinary(t, dir, "typo", conf, nil)
	in := &instance{name: "typo", cmd: cmd, log: logf}
	const line = "No stream matches order-*"
	require.Eventually(t, func() bool { return len(logLines(t, in, line)) > 0 }, 60*time.Second, 250*time.Millisecond, "no warning for a pattern that matches nothing")
	got := logLines(t, in, line)
	require.Len(t, got, 1, "said once, not at every listing")
	assert.Contains(t, got[0], "level=warn")
	assert.Contains(t, got[0], "/ready answers 200 meanwhile")
}
