package input

import (
	"context"
	"fmt"
	"math/big"
	"os"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/kinesis"
	"github.com/aws/aws-sdk-go-v2/service/kinesis/types"
	_ "github.com/redpanda-data/benthos/v4/public/components/pure"
	"github.com/redpanda-data/benthos/v4/public/service"
	"github.com/stretchr/testify/require"

	"github.com/connect-kinesis/connect-kinesis/internal/consumer"
	"github.com/connect-kinesis/connect-kinesis/internal/testenv"
	"github.com/connect-kinesis/connect-kinesis/plugins/checkpointer"
)

// TestMain makes every test trust kinesis-mock's TLS port (the AWS SDK's
// AWS_CA_BUNDLE: one test CA signs every kinesis-mock's certificate) and
// read enhanced fan-out subscriptions without the initial-response event
// kinesis-mock omits. Set once here rather than with t.Setenv, which
// parallel tests cannot call. It stops the shared emulators at the end.
func TestMain(m *testing.M) {
	ca, err := testenv.EmulatorCA()
	if err != nil {
		fmt.Fprintln(os.Stderr, "making the emulator CA:", err)
		os.Exit(1)
	}
	os.Setenv("AWS_CA_BUNDLE", ca.CA)
	os.Setenv(EnvEmulatorNoInitialResponse, "true")
	// For the example configs, which name no credentials (the others do).
	os.Setenv("AWS_ACCESS_KEY_ID", testenv.AccessKey)
	os.Setenv("AWS_SECRET_ACCESS_KEY", testenv.SecretKey)
	code := m.Run()
	testenv.CloseShared()
	os.Exit(code)
}

// delivery is one message as a test consumer saw it.
type delivery struct {
	shard, key, seq, data string
}

// collector records every delivered message, in delivery order.
type collector struct {
	mu  sync.Mutex
	all []delivery
}

func (c *collector) add(b service.MessageBatch) {
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, m := range b {
		shard, _ := m.MetaGet(MetaShard)
		key, _ := m.MetaGet(MetaPartitionKey)
		seq, _ := m.MetaGet(MetaSequenceNumber)
		data, _ := m.AsBytes()
		c.all = append(c.all, delivery{shard: shard, key: key, seq: seq, data: string(data)})
	}
}

func (c *collector) snapshot() []delivery {
	c.mu.Lock()
	defer c.mu.Unlock()
	return append([]delivery(nil), c.all...)
}

// distinct counts distinct record payloads delivered.
func (c *collector) distinct() int {
	seen := map[string]bool{}
	for _, d := range c.snapshot() {
		seen[d.data] = true
	}
	return len(seen)
}

// inputYAML is a kinesis input with test-friendly periods.
func inputYAML(stream, endpoint, redisURL, group string, extra string) string {
	return streamsInputYAML([]string{stream}, endpoint, redisURL, group, extra)
}

// streamsInputYAML is inputYAML for an input that reads several streams.
func streamsInputYAML(streams []string, endpoint, redisURL, group string, extra string) string {
	quoted := make([]string, len(streams))
	for i, s := range streams {
		quoted[i] = strconv.Quote(s)
	}
	return fmt.Sprintf(`
kinesis:
  streams: [ %s ]
  region: %s
  endpoint: %s
  credentials:
    id: %s
    secret: %s
  checkpoint:
    redis:
      url: %s
    group: %s
    commit_period: 200ms
  lease:
    period: 3s
    rebalance_period: 300ms
    handoff_timeout: 5s
  poll_interval: 200ms
  idle_poll_interval: 200ms
  shard_discovery_interval: 1s
%s`, strings.Join(quoted, ", "), testenv.Region, endpoint, testenv.AccessKey, testenv.SecretKey, redisURL, group, extra)
}

// runningStream is a Benthos stream reading the kinesis input into a func.
type runningStream struct {
	stream *service.Stream
	done   chan error
}

func startStream(t *testing.T, inYAML string, consume service.MessageBatchHandlerFunc) *runningStream {
	t.Helper()
	sb := service.NewStreamBuilder()
	require.NoError(t, sb.SetLoggerYAML("level: warn"))
	require.NoError(t, sb.AddInputYAML(inYAML))
	require.NoError(t, sb.AddBatchConsumerFunc(consume))
	s, err := sb.Build()
	require.NoError(t, err)
	rs := &runningStream{stream: s, done: make(chan error, 1)}
	go func() { rs.done <- s.Run(context.Background()) }()
	t.Cleanup(func() { rs.stop(t) })
	return rs
}

// stop shuts the stream down gracefully (acks drained, input closed).
func (rs *runningStream) stop(t *testing.T) {
	if rs.stream == nil {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	require.NoError(t, rs.stream.Stop(ctx))
	<-rs.done
	rs.stream = nil
}

// putRecords writes records with the given keys and payloads.
func putRecords(t *testing.T, c *kinesis.Client, stream string, keys, payloads []string) {
	t.Helper()
	for start := 0; start < len(keys); start += 500 {
		end := min(start+500, len(keys))
		var entries []types.PutRecordsRequestEntry
		for i := start; i < end; i++ {
			entries = append(entries, types.PutRecordsRequestEntry{PartitionKey: aws.String(keys[i]), Data: []byte(payloads[i])})
		}
		out, err := c.PutRecords(t.Context(), &kinesis.PutRecordsInput{StreamName: aws.String(stream), Records: entries})
		require.NoError(t, err)
		require.Zero(t, aws.ToInt32(out.FailedRecordCount))
	}
}

// seqLess compares sequence numbers as big integers.
func seqLess(a, b string) bool {
	x, _ := new(big.Int).SetString(a, 10)
	y, _ := new(big.Int).SetString(b, 10)
	return x.Cmp(y) < 0
}

// checkpoints reads the committed checkpoints of a stream identity.
func checkpoints(t *testing.T, redisURL, group, streamID string) map[string]consumer.Position {
	t.Helper()
	cfg := checkpointer.DefaultConfig()
	cfg.RedisURL, cfg.Group = redisURL, group
	c, err := checkpointer.New(t.Context(), cfg, nil, nil)
	require.NoError(t, err)
	defer c.Close()
	ps, err := c.Stream(streamID).Checkpoints(t.Context())
	require.NoError(t, err)
	return ps
}
