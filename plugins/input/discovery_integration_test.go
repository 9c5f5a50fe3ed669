package input

import (
	"context"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/kinesis"
	"github.com/redpanda-data/benthos/v4/public/service"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/connect-kinesis/connect-kinesis/internal/kinesisx"
	"github.com/connect-kinesis/connect-kinesis/internal/testenv"
	"github.com/connect-kinesis/connect-kinesis/plugins/checkpointer"
)

// streamCollector counts every delivered message by stream and payload.
type streamCollector struct {
	mu   sync.Mutex
	seen map[string]int // "<stream>|<payload>" -> deliveries
}

func (c *streamCollector) add(b service.MessageBatch) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.seen == nil {
		c.seen = map[string]int{}
	}
	for _, m := range b {
		stream, _ := m.MetaGet(MetaStream)
		data, _ := m.AsBytes()
		c.seen[stream+"|"+string(data)]++
	}
}

// count is the deliveries of records of stream whose payload starts with
// prefix, and how many of those records came more than once.
func (c *streamCollector) count(stream, prefix string) (n, dup int) {
	c.mu.Lock()
	defer c.mu.Unlock()
	for k, v := range c.seen {
		if strings.HasPrefix(k, stream+"|"+prefix) {
			n += v
			if v > 1 {
				dup++
			}
		}
	}
	return n, dup
}

// Two instances read the streams of a pattern as they come and go: the
// streams of the start are read whole, a stream created while they run is
// found, leased and read from its first record (new_stream_start_position
// trim_horizon, although start_position is latest), a deleted stream is
// released and nothing of it comes again, and the stream created again
// under its name is read as a new stream.
func TestIntegrationStreamsFoundAndDroppedWhileRunning(t *testing.T) {
	t.Parallel()
	emu := testenv.SharedKinesisMock(t)
	red := testenv.NewRedis(t)
	client := emu.Client()
	// A prefix of this test's own: the emulator is shared.
	p := uniquePrefix("tdisc")
	arn1 := emu.MustCreateStream(t, p+"1", 2)
	emu.MustCreateStream(t, p+"2", 1)

	const interval = 5 * time.Second
	extra := "  start_position: latest\n  new_stream_start_position: trim_horizon\n"
	col := &streamCollector{}
	logsA, logsB := &lockedBuffer{}, &lockedBuffer{}
	startFollowing(t, followingYAML(p+"*", emu.Endpoint, red.URL(), "a", interval, extra), col, logsA)
	startFollowing(t, followingYAML(p+"*", emu.Endpoint, red.URL(), "b", interval, extra), col, logsB)

	cfg := checkpointer.DefaultConfig()
	cfg.RedisURL, cfg.Group = red.URL(), "g"
	ck, err := checkpointer.New(t.Context(), cfg, nil, nil)
	require.NoError(t, err)
	defer ck.Close()
	leased := func(arn string, shards int) bool {
		ls, err := ck.Stream(arn).Leases(t.Context())
		require.NoError(t, err)
		n := 0
		for _, l := range ls {
			if l.Owner != "" && !l.Expired {
				n++
			}
		}
		return n == shards
	}
	require.Eventually(t, func() bool { return leased(arn1, 2) }, 2*interval+15*time.Second, 100*time.Millisecond, "the streams of the start are leased")

	// start_position latest: what is written from now on is read.
	putKeyed(t, client, p+"1", "a", 40)
	putKeyed(t, client, p+"2", "a", 20)
	require.Eventually(t, func() bool {
		n1, _ := col.count(p+"1", "a-")
		n2, _ := col.count(p+"2", "a-")
		return n1 == 40 && n2 == 20
	}, 30*time.Second, 100*time.Millisecond, "the records of the streams of the start")

	// A stream created while the group runs, with records before it is
	// found: read from its first record.
	created := time.Now()
	arn3 := emu.MustCreateStream(t, p+"3", 2)
	active := time.Since(created)
	putKeyed(t, client, p+"3", "a", 30)
	require.Eventually(t, func() bool { return leased(arn3, 2) }, 3*interval+15*time.Second, 50*time.Millisecond, "the new stream's shards are leased")
	toLease := time.Since(created)
	require.Eventually(t, func() bool { n, _ := col.count(p+"3", "a-"); return n >= 30 }, 30*time.Second, 100*time.Millisecond, "the new stream is read from its start")
	toRead := time.Since(created)
	t.Logf("new stream: ACTIVE after %v, both shards leased %v after CreateStream, all records read after %v (stream_discovery_interval %v)", active.Round(time.Millisecond), toLease.Round(time.Millisecond), toRead.Round(time.Millisecond), interval)

	// The first stream is deleted: released, and nothing of it comes
	// again.
	_, err = client.DeleteStream(t.Context(), &kinesis.DeleteStreamInput{StreamName: aws.String(p + "1")})
	require.NoError(t, err)
	require.Eventually(t, func() bool {
		_, err := client.DescribeStreamSummary(t.Context(), &kinesis.DescribeStreamSummaryInput{StreamName: aws.String(p + "1")})
		return kinesisx.ErrorCode(err) == kinesisx.CodeResourceNotFound
	}, 10*time.Second, 100*time.Millisecond)
	deleted := time.Now()
	stopped := func() bool {
		return logsA.count("Stopped reading stream "+p+"1") == 1 && logsB.count("Stopped reading stream "+p+"1") == 1
	}
	require.Eventually(t, stopped, 3*interval+15*time.Second, 100*time.Millisecond, "both instances stop reading the deleted stream")
	t.Logf("deleted stream: both instances stopped reading it %v after the deletion", time.Since(deleted).Round(time.Millisecond))
	putKeyed(t, client, p+"2", "b", 20)

	// Created again under its name: a new stream, read from its start.
	arn1b := emu.MustCreateStream(t, p+"1", 1)
	require.Equal(t, arn1, arn1b, "the emulator keeps the ARN of a recreated stream")
	putKeyed(t, client, p+"1", "new-", 15)
	require.Eventually(t, func() bool {
		n, _ := col.count(p+"1", "new-")
		m, _ := col.count(p+"2", "b-")
		return n >= 15 && m >= 20
	}, 3*interval+30*time.Second, 100*time.Millisecond, "the recreated stream and the live one are read")

	for _, tc := range []struct {
		stream, prefix string
		want           int
	}{{p + "1", "a-", 40}, {p + "1", "new-", 15}, {p + "2", "a-", 20}, {p + "2", "b-", 20}, {p + "3", "a-", 30}} {
		n, dup := col.count(tc.stream, tc.prefix)
		t.Logf("%s %s*: %d delivered, %d more than once", tc.stream, tc.prefix, n, dup)
		assert.Equal(t, tc.want, n, "%s %s*: each record once", tc.stream, tc.prefix)
		assert.Zero(t, dup, tc.stream)
	}
	for _, logs := range []*lockedBuffer{logsA, logsB} {
		assert.Equal(t, 1, logs.count("Reading stream "+p+"3"), logs.String())
	}
}

// uniquePrefix is a stream name prefix of this test run: the emulator is
// shared by the tests of the process, also across -count runs.
func uniquePrefix(base string) string {
	return fmt.Sprintf("%s%d-", base, time.Now().UnixNano()%1_000_000_000)
}

// startFollowing runs the input into col, its logs (INFO and up) into logs.
func startFollowing(t *testing.T, inYAML string, col *streamCollector, logs *lockedBuffer) *runningStream {
	t.Helper()
	sb := service.NewStreamBuilder()
	sb.SetLogger(slog.New(slog.NewTextHandler(logs, &slog.HandlerOptions{Level: slog.LevelInfo})))
	require.NoError(t, sb.AddInputYAML(inYAML))
	require.NoError(t, sb.AddBatchConsumerFunc(func(_ context.Context, b service.MessageBatch) error {
		col.add(b)
		return nil
	}))
	s, err := sb.Build()
	require.NoError(t, err)
	rs := &runningStream{stream: s, done: make(chan error, 1)}
	go func() { rs.done <- s.Run(context.Background()) }()
	t.Cleanup(func() { rs.stop(t) })
	return rs
}

// followingYAML is the input reading the streams of pattern, with
// discovery every interval, as instance id, plus extra fields.
func followingYAML(pattern, endpoint, redisURL, id string, interval time.Duration, extra string) string {
	extra = fmt.Sprintf("  stream_discovery_interval: %v\n", interval) + extra
	return strings.Replace(inputYAML(pattern, endpoint, redisURL, "g", extra), "  lease:\n", "  lease:\n    instance_id: "+id+"\n", 1)
}

// putKeyed writes n records "<prefix>-<i>" (prefix ending in '-' is kept
// as is) under ten partition keys.
func putKeyed(t *testing.T, client *kinesis.Client, stream, prefix string, n int) {
	t.Helper()
	if !strings.HasSuffix(prefix, "-") {
		prefix += "-"
	}
	keys, payloads := make([]string, n), make([]string, n)
	for i := range n {
		keys[i], payloads[i] = fmt.Sprintf("k%d", i%10), fmt.Sprintf("%s%d", prefix, i)
	}
	putRecords(t, client, stream, keys, payloads)
}
