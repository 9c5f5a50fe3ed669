package input

import (
	"bytes"
	"context"
	"fmt"
	"log/slog"
	"math/big"
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

// lockedBuffer is a log sink read while the stream writes to it.
type lockedBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *lockedBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

// count counts the log lines containing s.
func (b *lockedBuffer) count(s string) int {
	b.mu.Lock()
	defer b.mu.Unlock()
	return strings.Count(b.buf.String(), s)
}

// startLogged runs the input into col, its logs (INFO and up) into logs.
func startLogged(t *testing.T, inYAML string, col *collector, logs *lockedBuffer) *runningStream {
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

// splitAndClose splits the stream's one shard and waits until the group
// closed it: state that would hold back a recreated stream's shard of the
// same id.
func splitAndClose(t *testing.T, emu *testenv.Kinesis, stream, shard string, store *checkpointer.Store) {
	t.Helper()
	_, err := emu.Client().SplitShard(t.Context(), &kinesis.SplitShardInput{
		StreamName: aws.String(stream), ShardToSplit: aws.String(shard), NewStartingHashKey: aws.String(new(big.Int).Lsh(big.NewInt(1), 127).String()),
	})
	require.NoError(t, err)
	_, err = emu.WaitActive(t.Context(), stream)
	require.NoError(t, err)
	require.Eventually(t, func() bool {
		closed, err := store.ClosedShards(t.Context())
		require.NoError(t, err)
		return closed[shard]
	}, 30*time.Second, 100*time.Millisecond, "the split parent is not closed")
}

// A stream deleted while it is read stops its readers (their leases are
// released), is reported at ERROR at most once per discovery interval, and
// is read again by itself when it is created anew: the new stream from
// the group's start, whatever the deleted one's checkpoints and closed
// shards were, and none of the deleted stream's records again.
func TestIntegrationDeletedStreamStopsAndResumes(t *testing.T) {
	t.Parallel()
	emu := testenv.SharedKinesisMock(t)
	red := testenv.NewRedis(t)
	const stream, shard = "comes-and-goes", "shardId-000000000000"
	arn := emu.MustCreateStream(t, stream, 1)
	client := emu.Client()
	put := func(prefix string, n int) { putNumbered(t, client, stream, prefix, n) }
	put("old", 5)

	col := &collector{}
	logs := &lockedBuffer{}
	startLogged(t, inputYAML(stream, emu.Endpoint, red.URL(), "g", ""), col, logs)
	require.Eventually(t, func() bool { return col.distinct() == 5 }, 30*time.Second, 100*time.Millisecond)

	cfg := checkpointer.DefaultConfig()
	cfg.RedisURL, cfg.Group = red.URL(), "g"
	ck, err := checkpointer.New(t.Context(), cfg, nil, nil)
	require.NoError(t, err)
	defer ck.Close()
	store := ck.Stream(arn)
	held := func() bool {
		ls, err := store.Leases(t.Context())
		require.NoError(t, err)
		for _, l := range ls {
			if !l.Expired {
				return true
			}
		}
		return false
	}

	// The deleted stream was resharded: its first shard is closed in the
	// group's state, and would hold back the recreated stream's shard of
	// the same id if that state were kept.
	splitAndClose(t, emu, stream, shard, store)
	require.Eventually(t, held, 10*time.Second, 100*time.Millisecond)

	_, err = client.DeleteStream(t.Context(), &kinesis.DeleteStreamInput{StreamName: aws.String(stream)})
	require.NoError(t, err)
	require.Eventually(t, func() bool {
		_, err := client.DescribeStreamSummary(t.Context(), &kinesis.DescribeStreamSummaryInput{StreamName: aws.String(stream)})
		return kinesisx.ErrorCode(err) == kinesisx.CodeResourceNotFound
	}, 10*time.Second, 100*time.Millisecond)
	const missing = "The stream does not exist"
	require.Eventually(t, func() bool { return !held() }, 15*time.Second, 100*time.Millisecond, "the reader of the deleted stream kept its lease")
	require.Eventually(t, func() bool { return logs.count(missing) >= 1 }, 15*time.Second, 100*time.Millisecond)
	// Over a few discovery intervals (1s), one error per interval at most.
	before := logs.count(missing)
	window := 4 * time.Second
	time.Sleep(window)
	reported := logs.count(missing) - before
	t.Logf("%d errors about the missing stream in %v (shard_discovery_interval 1s)", reported, window)
	assert.GreaterOrEqual(t, reported, 2, "the missing stream is reported every interval")
	assert.LessOrEqual(t, reported, 5, "at most once per discovery interval")
	// A read already on its way while the stream is being deleted may fail
	// with another error first (the emulator answers while the stream is
	// DELETING) and warn once; after that the reader must stay quiet, not
	// retry with a warning every few seconds.
	assert.LessOrEqual(t, logs.count("Reading the shard failed"), 1, "no per-shard retry warnings for a deleted stream")

	// Created anew, the stream is found again, its shard taken and read:
	// the group's checkpoints and closed shards of the deleted stream (same
	// ARN, same shard id) are cleared once, with one error, and the new
	// stream's shard starts at the group's start. Nothing of the old stream
	// comes again.
	emu.MustCreateStream(t, stream, 1)
	require.Eventually(t, held, 30*time.Second, 100*time.Millisecond, "the recreated stream's shard is not taken again")
	put("new", 5)
	require.Eventually(t, func() bool { return col.distinct() == 10 }, 30*time.Second, 100*time.Millisecond,
		"the recreated stream's records are not delivered")
	newCount, oldCount := 0, 0
	for _, d := range col.snapshot() {
		if strings.HasPrefix(d.data, "new-") {
			newCount++
		} else {
			oldCount++
		}
	}
	t.Logf("delivered %d records of the deleted stream, %d of the recreated one", oldCount, newCount)
	assert.Equal(t, 5, newCount, "each record of the recreated stream is delivered once")
	assert.Equal(t, 5, oldCount, "no record of the deleted stream is delivered again")
	assert.Equal(t, 1, logs.count("The stream exists again"))
	assert.Equal(t, 1, logs.count("The stream was deleted and created again"), "one error about the recreation")
}

// A stream listed by name and by ARN is refused at connect, naming both.
func TestIntegrationStreamListedByNameAndARNIsRejected(t *testing.T) {
	t.Parallel()
	emu := testenv.SharedKinesisMock(t)
	red := testenv.NewRedis(t)
	arn := emu.MustCreateStream(t, "twice", 1)
	conf, err := Spec().ParseYAML(strings.Replace(inputYAML("twice", emu.Endpoint, red.URL(), "g", ""), `streams: [ "twice" ]`, fmt.Sprintf(`streams: [ "twice", %q ]`, arn), 1)[len("\nkinesis:\n"):], nil)
	require.NoError(t, err)
	// The constructor already refuses a name and the ARN that ends in it.
	_, err = ConfigFromParsed(conf)
	require.Error(t, err)
	assert.ErrorContains(t, err, "twice")
	assert.ErrorContains(t, err, arn)

	// Connect checks again after resolving each entry's identity, which is
	// what catches entries the configuration alone cannot tell apart.
	single, err := Spec().ParseYAML(inputYAML("twice", emu.Endpoint, red.URL(), "g", "")[len("\nkinesis:\n"):], nil)
	require.NoError(t, err)
	c, err := ConfigFromParsed(single)
	require.NoError(t, err)
	c.Consumer.Streams = append(c.Consumer.Streams, arn)
	in := newFromConfig(c, nil, nil)
	err = in.Connect(t.Context())
	require.Error(t, err)
	assert.ErrorContains(t, err, `"twice"`)
	assert.ErrorContains(t, err, arn)
	_ = in.Close(t.Context())
}

// A stream deleted and recreated while no instance runs is found recreated
// at start: the group's state of the deleted stream is cleared, with one
// error, and the new stream is read from the group's start.
func TestIntegrationStreamRecreatedWhileStopped(t *testing.T) {
	t.Parallel()
	emu := testenv.SharedKinesisMock(t)
	red := testenv.NewRedis(t)
	const stream, shard = "recreated-offline", "shardId-000000000000"
	arn := emu.MustCreateStream(t, stream, 1)
	client := emu.Client()
	put := func(prefix string, n int) { putNumbered(t, client, stream, prefix, n) }
	put("old", 5)
	cfg := checkpointer.DefaultConfig()
	cfg.RedisURL, cfg.Group = red.URL(), "g"
	ck, err := checkpointer.New(t.Context(), cfg, nil, nil)
	require.NoError(t, err)
	defer ck.Close()
	store := ck.Stream(arn)

	col := &collector{}
	logs := &lockedBuffer{}
	rs := startLogged(t, inputYAML(stream, emu.Endpoint, red.URL(), "g", ""), col, logs)
	require.Eventually(t, func() bool { return col.distinct() == 5 }, 30*time.Second, 100*time.Millisecond)
	splitAndClose(t, emu, stream, shard, store)
	rs.stop(t)

	_, err = client.DeleteStream(t.Context(), &kinesis.DeleteStreamInput{StreamName: aws.String(stream)})
	require.NoError(t, err)
	require.Eventually(t, func() bool {
		_, err := client.DescribeStreamSummary(t.Context(), &kinesis.DescribeStreamSummaryInput{StreamName: aws.String(stream)})
		return kinesisx.ErrorCode(err) == kinesisx.CodeResourceNotFound
	}, 10*time.Second, 100*time.Millisecond)
	emu.MustCreateStream(t, stream, 1)
	put("new", 5)

	startLogged(t, inputYAML(stream, emu.Endpoint, red.URL(), "g", ""), col, logs)
	require.Eventually(t, func() bool { return col.distinct() == 10 }, 30*time.Second, 100*time.Millisecond,
		"the recreated stream's records are not delivered")
	assert.Len(t, col.snapshot(), 10, "no record delivered twice")
	assert.Equal(t, 1, logs.count("The stream was deleted and created again"), "one error about the recreation")
}

// putNumbered writes n records "<prefix>-<i>" under one partition key, so
// they stay in order on one shard.
func putNumbered(t *testing.T, client *kinesis.Client, stream, prefix string, n int) {
	t.Helper()
	keys, payloads := make([]string, n), make([]string, n)
	for i := range n {
		keys[i], payloads[i] = "k", fmt.Sprintf("%s-%d", prefix, i)
	}
	putRecords(t, client, stream, keys, payloads)
}

// String returns everything logged so far.
func (b *lockedBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}
