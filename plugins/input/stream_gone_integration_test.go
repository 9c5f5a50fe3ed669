package input

import (
	"bytes"
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

// A stream deleted while it is read stops its readers (their leases are
// released), is reported at ERROR at most once per discovery interval, and
// is read again by itself when it is created anew.
func TestIntegrationDeletedStreamStopsAndResumes(t *testing.T) {
	emu := testenv.NewKinesisMock(t)
	red := testenv.NewRedis(t)
	const stream, shard = "comes-and-goes", "shardId-000000000000"
	arn := emu.MustCreateStream(t, stream, 1)
	client := emu.Client()
	put := func(prefix string, n int) {
		keys, payloads := make([]string, n), make([]string, n)
		for i := range n {
			keys[i], payloads[i] = "k", fmt.Sprintf("%s-%d", prefix, i)
		}
		putRecords(t, client, stream, keys, payloads)
	}
	put("old", 5)

	col := &collector{}
	logs := &lockedBuffer{}
	sb := service.NewStreamBuilder()
	sb.SetLogger(slog.New(slog.NewTextHandler(logs, &slog.HandlerOptions{Level: slog.LevelInfo})))
	require.NoError(t, sb.AddInputYAML(inputYAML(stream, emu.Endpoint, red.URL(), "g", "")))
	require.NoError(t, sb.AddBatchConsumerFunc(func(_ context.Context, b service.MessageBatch) error {
		col.add(b)
		return nil
	}))
	s, err := sb.Build()
	require.NoError(t, err)
	rs := &runningStream{stream: s, done: make(chan error, 1)}
	go func() { rs.done <- s.Run(context.Background()) }()
	t.Cleanup(func() { rs.stop(t) })
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
		l, ok := ls[shard]
		return ok && !l.Expired
	}
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
	assert.Zero(t, logs.count("Reading the shard failed"), "no per-shard retry warnings for a deleted stream")

	// Created anew, the stream is found again and its shard taken. (Its
	// records are not read yet: the group's checkpoints belong to the
	// deleted stream, whose sequence numbers the new one does not know;
	// see docs/decisions.md.)
	emu.MustCreateStream(t, stream, 1)
	require.Eventually(t, held, 30*time.Second, 100*time.Millisecond, "the recreated stream's shard is not taken again")
	assert.Equal(t, 1, logs.count("The stream exists again"))
}

// A stream listed by name and by ARN is refused at connect, naming both.
func TestIntegrationStreamListedByNameAndARNIsRejected(t *testing.T) {
	emu := testenv.NewKinesisMock(t)
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
