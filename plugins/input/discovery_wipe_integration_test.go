package input

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/connect-kinesis/connect-kinesis/internal/consumer"
	"github.com/connect-kinesis/connect-kinesis/internal/faultproxy"
	"github.com/connect-kinesis/connect-kinesis/internal/testenv"
)

// Redis flushed while a group follows a pattern: the group lists again
// and goes on. The stream of the start is read on, and a stream created
// while the discovery hash is empty is found and read from its first
// record (new_stream_start_position trim_horizon, start_position latest).
// Before the hash was re-seeded from what the instances last read, the
// first listing after the wipe counted as the group's first, the new
// stream as one of the start, and its records written before its shards
// were leased were skipped (latest).
func TestIntegrationStreamFoundAfterRedisFlushed(t *testing.T) {
	t.Parallel()
	emu := testenv.SharedKinesisMock(t)
	red := testenv.NewRedis(t)
	client := emu.Client()
	p := uniquePrefix("twipe")
	emu.MustCreateStream(t, p+"1", 1)
	proxy, err := faultproxy.Start(emu.Endpoint, 3)
	require.NoError(t, err)
	t.Cleanup(func() { _ = proxy.Close() })

	const interval = 5 * time.Second
	extra := "  start_position: latest\n  new_stream_start_position: trim_horizon\n"
	col := &streamCollector{}
	logsA, logsB := &lockedBuffer{}, &lockedBuffer{}
	startFollowing(t, followingYAML(p+"*", proxy.URL, red.URL(), "a", interval, extra), col, logsA)
	startFollowing(t, followingYAML(p+"*", proxy.URL, red.URL(), "b", interval, extra), col, logsB)
	require.Eventually(t, func() bool {
		return logsA.count("Reading stream "+p+"1") == 1 && logsB.count("Reading stream "+p+"1") == 1
	}, 2*interval+15*time.Second, 100*time.Millisecond, "both instances read the stream of the start")
	// The shards of the start are leased once records written now are read.
	require.Eventually(t, func() bool {
		putKeyed(t, client, p+"1", "probe", 1)
		n, _ := col.count(p+"1", "probe-")
		return n > 0
	}, 30*time.Second, time.Second, "the stream of the start is read")
	putKeyed(t, client, p+"1", "a", 20)
	require.Eventually(t, func() bool { n, _ := col.count(p+"1", "a-"); return n >= 20 }, 30*time.Second, 100*time.Millisecond)

	rc := red.Client()
	defer rc.Close()
	// No listing succeeds until the new stream's records are older than
	// the margin of `latest` (consumer.LatestSkewMargin): read from a
	// start_position of latest, they would be skipped.
	proxy.Set("ListStreams", faultproxy.Rule{ErrorRate: 1})
	require.NoError(t, rc.FlushAll(t.Context()).Err())
	wiped := time.Now()
	emu.MustCreateStream(t, p+"2", 1)
	putKeyed(t, client, p+"2", "a", 30)
	putKeyed(t, client, p+"1", "b", 20)
	time.Sleep(consumer.LatestSkewMargin + 2*time.Second)
	proxy.Clear()

	require.Eventually(t, func() bool { n, _ := col.count(p+"1", "b-"); return n >= 20 },
		3*interval+time.Minute, 100*time.Millisecond, "after the wipe the stream of the start is read on")
	assert.Eventually(t, func() bool { n, _ := col.count(p+"2", "a-"); return n >= 30 },
		3*interval+time.Minute, 100*time.Millisecond, "the stream created after the wipe is read from its first record")
	t.Logf("after FLUSHALL: the new stream's 30 records and the old stream's 20 read %v later", time.Since(wiped).Round(time.Millisecond))
	for _, tc := range []struct{ stream, prefix string }{{p + "2", "a-"}, {p + "1", "b-"}} {
		n, dup := col.count(tc.stream, tc.prefix)
		t.Logf("%s %s*: %d delivered, %d more than once", tc.stream, tc.prefix, n, dup)
	}
	assert.Eventually(t, func() bool {
		return logsA.count("Reading stream "+p+"2") == 1 && logsB.count("Reading stream "+p+"2") == 1
	}, 2*interval+15*time.Second, 100*time.Millisecond, "each instance reads the new stream")
}
