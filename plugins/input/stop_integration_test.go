package input

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/redpanda-data/benthos/v4/public/service"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/connect-kinesis/connect-kinesis/internal/testenv"
	"github.com/connect-kinesis/connect-kinesis/plugins/checkpointer"
)

// stuckOutput acks the first ackFirst records it gets, then never answers
// again until unstuck: an output that keeps retrying (an http_client
// whose server is gone, with many retries).
type stuckOutput struct {
	mu       sync.Mutex
	ackFirst int
	acked    map[string]bool
	got      int
	unstuck  chan struct{}
}

func (o *stuckOutput) write(ctx context.Context, b service.MessageBatch) error {
	o.mu.Lock()
	o.got += len(b)
	if len(o.acked) >= o.ackFirst {
		o.mu.Unlock()
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-o.unstuck:
			return errors.New("the output gave up")
		}
	}
	for _, m := range b {
		data, _ := m.AsBytes()
		o.acked[string(data)] = true
	}
	o.mu.Unlock()
	return nil
}

func (o *stuckOutput) state() (got int, acked map[string]bool) {
	o.mu.Lock()
	defer o.mu.Unlock()
	acked = make(map[string]bool, len(o.acked))
	for k := range o.acked {
		acked[k] = true
	}
	return o.got, acked
}

// startWithOutput runs the input into fn, its logs (INFO and up) into
// logs, without a cleanup: the test stops it.
func startWithOutput(t *testing.T, inYAML string, fn service.MessageBatchHandlerFunc, logs *lockedBuffer) (*service.Stream, chan error) {
	t.Helper()
	sb := service.NewStreamBuilder()
	sb.SetLogger(slog.New(slog.NewTextHandler(logs, &slog.HandlerOptions{Level: slog.LevelInfo})))
	require.NoError(t, sb.AddInputYAML(inYAML))
	require.NoError(t, sb.AddBatchConsumerFunc(fn))
	s, err := sb.Build()
	require.NoError(t, err)
	done := make(chan error, 1)
	go func() { done <- s.Run(context.Background()) }()
	return s, done
}

// A stop (SIGTERM) while the output is stuck hands every shard off within
// lease.handoff_timeout: the input learns of the stop from Benthos at once,
// commits what was acked and releases its leases, rather than waiting for
// acks that never come until the whole shutdown_timeout has passed. The
// next owner takes the shards at once and delivers again only what the
// stuck output never acked.
func TestIntegrationStopWithAStuckOutputHandsOffWithinHandoffTimeout(t *testing.T) {
	t.Parallel()
	emu := testenv.NewEmulator(t, testenv.KindKinesisMock)
	red := testenv.NewRedis(t)
	const stream, n = "stop-stuck-output", 200
	arn := emu.MustCreateStream(t, stream, 2)
	id := arn
	if id == "" {
		id = stream
	}
	keys, payloads := make([]string, n), make([]string, n)
	for i := range n {
		keys[i], payloads[i] = fmt.Sprintf("k%d", i%50), fmt.Sprintf("r%05d", i)
	}
	putRecords(t, emu.Client(), stream, keys, payloads)

	const handoff = 2 * time.Second
	yaml := fmt.Sprintf(`
kinesis:
  streams: [ %q ]
  region: %s
  endpoint: %s
  credentials: { id: %s, secret: %s }
  checkpoint:
    redis: { url: %s }
    group: g1
    commit_period: 200ms
  lease: { period: 15s, rebalance_period: 300ms, handoff_timeout: %s }
  limit: 20
  poll_interval: 200ms
  idle_poll_interval: 200ms
`, stream, testenv.Region, emu.Endpoint, testenv.AccessKey, testenv.SecretKey, red.URL(), handoff)

	// The first instance's output acks 140 records, then is stuck.
	out := &stuckOutput{ackFirst: 140, acked: map[string]bool{}, unstuck: make(chan struct{})}
	logsA := &lockedBuffer{}
	a, doneA := startWithOutput(t, yaml, out.write, logsA)
	defer func() {
		close(out.unstuck)
		<-doneA
	}()
	require.Eventually(t, func() bool { got, _ := out.state(); return got > out.ackFirst }, 30*time.Second, 50*time.Millisecond, "the output never got stuck")
	time.Sleep(500 * time.Millisecond) // the other shard's batch reaches the stuck pipeline too

	cfg := checkpointer.DefaultConfig()
	cfg.RedisURL, cfg.Group = red.URL(), "g1"
	ck, err := checkpointer.New(t.Context(), cfg, nil, nil)
	require.NoError(t, err)
	defer ck.Close()
	store := ck.Stream(id)
	held := func() int {
		ls, err := store.Leases(t.Context())
		require.NoError(t, err)
		n := 0
		for _, l := range ls {
			if !l.Expired {
				n++
			}
		}
		return n
	}
	require.Equal(t, 2, held(), "the first instance holds both shards")

	// SIGTERM: Benthos stops the stream, with a shutdown_timeout of 12s.
	stopAt := time.Now()
	go func() {
		ctx, cancel := context.WithTimeout(context.Background(), 12*time.Second)
		defer cancel()
		_ = a.Stop(ctx)
	}()
	var releasedAfter time.Duration
	for held() > 0 {
		if time.Since(stopAt) > handoff+4*time.Second {
			t.Fatalf("leases still held %v after the stop (handoff_timeout %v)", time.Since(stopAt).Round(10*time.Millisecond), handoff)
		}
		time.Sleep(20 * time.Millisecond)
	}
	releasedAfter = time.Since(stopAt)
	t.Logf("leases released %v after the stop", releasedAfter.Round(10*time.Millisecond))
	assert.LessOrEqual(t, releasedAfter, handoff+time.Second, "leases released later than handoff_timeout + 1s")
	// The line is written once every reader has ended, just after the
	// releases this loop saw.
	assert.Eventually(t, func() bool {
		return strings.Contains(logsA.String(), "were not acknowledged within lease.handoff_timeout")
	}, 5*time.Second, 20*time.Millisecond,
		"the stop names what it left uncommitted: %s", logsA.String())

	// The next owner takes the shards at once (not after lease.period) and
	// delivers only what the stuck output never acked.
	_, acked := out.state()
	require.Len(t, acked, out.ackFirst)
	col := &collector{}
	logsB := &lockedBuffer{}
	joined := time.Now()
	b, doneB := startWithOutput(t, yaml, func(_ context.Context, b service.MessageBatch) error {
		col.add(b)
		return nil
	}, logsB)
	require.Eventually(t, func() bool { return col.distinct() >= n-len(acked) }, 12*time.Second, 20*time.Millisecond,
		"the next owner delivered %d of the %d un-acked records", col.distinct(), n-len(acked))
	t.Logf("the next owner delivered the %d un-acked records %v after it started", n-len(acked), time.Since(joined).Round(10*time.Millisecond))
	// Well under lease.period (15s): it did not wait for a lease to expire.
	assert.Less(t, time.Since(joined), 10*time.Second, "the next owner waited for leases to expire")
	time.Sleep(time.Second)
	var again []string
	for _, d := range col.snapshot() {
		if acked[d.data] {
			again = append(again, d.data)
		}
	}
	assert.Empty(t, again, "the next owner delivered again records the first instance had acked")
	assert.Equal(t, n-len(acked), col.distinct())

	// A clean stop says, once, what it handed off and how long it took.
	ctx, cancel := context.WithTimeout(t.Context(), 12*time.Second)
	defer cancel()
	require.NoError(t, b.Stop(ctx))
	require.NoError(t, <-doneB)
	assert.Equal(t, 1, logsB.count("committed and released 2 shards in"), "logs:\n%s", logsB.String())
	for _, l := range strings.Split(logsA.String()+logsB.String(), "\n") {
		if strings.Contains(l, "Stopp") {
			t.Log(l)
		}
	}
}
