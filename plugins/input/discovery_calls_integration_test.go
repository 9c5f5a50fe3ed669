package input

import (
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/connect-kinesis/connect-kinesis/internal/faultproxy"
	"github.com/connect-kinesis/connect-kinesis/internal/testenv"
)

// However many instances run, the group lists the streams once per
// stream_discovery_interval: ListStreams calls counted at the proxy every
// instance reaches Kinesis through.
func TestIntegrationListStreamsOncePerIntervalPerGroup(t *testing.T) {
	t.Parallel()
	emu := testenv.NewKinesisMock(t) // its own: one ListStreams page
	red := testenv.NewRedis(t)
	emu.MustCreateStream(t, "tcalls-1", 1)
	emu.MustCreateStream(t, "tcalls-2", 1)
	p, err := faultproxy.Start(emu.Endpoint, 7)
	require.NoError(t, err)
	t.Cleanup(func() { _ = p.Close() })
	putKeyed(t, emu.Client(), "tcalls-1", "a", 10)
	putKeyed(t, emu.Client(), "tcalls-2", "a", 10)

	const interval, instances = 5 * time.Second, 3
	col := &streamCollector{}
	for i := range instances {
		startFollowing(t, followingYAML("tcalls-*", p.URL, red.URL(), fmt.Sprintf("i%d", i), interval, ""), col, &lockedBuffer{})
	}
	require.Eventually(t, func() bool {
		n1, _ := col.count("tcalls-1", "a-")
		n2, _ := col.count("tcalls-2", "a-")
		return n1 >= 10 && n2 >= 10
	}, 2*interval+30*time.Second, 100*time.Millisecond)

	before := p.Stats("ListStreams").Requests
	const window = 4 * interval
	time.Sleep(window)
	calls := p.Stats("ListStreams").Requests - before
	t.Logf("%d ListStreams calls in %v from %d instances (stream_discovery_interval %v)", calls, window, instances, interval)
	assert.LessOrEqual(t, calls, int(window/interval)+1, "one listing per interval for the group")
	assert.GreaterOrEqual(t, calls, int(window/interval)-1, "the group lists every interval, not every other one")
	for _, s := range []string{"tcalls-1", "tcalls-2"} {
		_, dup := col.count(s, "a-")
		assert.Zero(t, dup, s)
	}
}
