package reader

import (
	"bytes"
	"context"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/service/kinesis/types"
	"github.com/redpanda-data/benthos/v4/public/service"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/connect-kinesis/connect-kinesis/internal/consumer"
	"github.com/connect-kinesis/connect-kinesis/internal/consumer/consumertest"
	"github.com/connect-kinesis/connect-kinesis/internal/consumer/source"
)

// syncBuffer is a log sink safe for the reader's goroutines.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// Guards the defect "a shard blocked by a poison record shows no lag":
// without a dead letter, kinesis_input_millis_behind_latest stayed at the
// last answer's MillisBehindLatest (0 for a shard read to its tip) while a
// record failed forever, and nothing but the processor's own error was
// logged. The gauge must be the age of the oldest record not yet done and
// grow while the shard waits, and one WARN naming the stream, the shard
// and the record's sequence number must come once per interval, not once
// per failure. Not parallel: it shortens blockedWarnInterval.
func TestBlockedShardReportsTheAgeOfItsOldestRecordAndWarnsOncePerInterval(t *testing.T) {
	old := blockedWarnInterval
	blockedWarnInterval = 500 * time.Millisecond
	t.Cleanup(func() { blockedWarnInterval = old })

	const age = 3 * time.Second
	arrived := time.Now().Add(-age)
	shard := nextShard()
	ctx, cancel := context.WithCancel(t.Context())
	api := consumertest.NewKinesis()
	// The shard is read to its tip: every answer says 0 ms behind.
	api.Add(shard, &consumertest.KinesisShard{Records: 10, Arrival: func(int) time.Time { return arrived }})
	store := consumertest.NewStore(time.Minute)
	take, err := store.Acquire(ctx, shard, "me")
	require.NoError(t, err)
	cfg := poisonConfig(10, consumer.Redelivery{Isolate: true})
	require.NoError(t, cfg.Validate())
	out := make(chan *consumer.Batch)
	st := testStream(ctx, &cfg, api, store, out)
	st.Metrics = consumer.NewMetrics(consumertest.Metrics(t))
	logs := &syncBuffer{}
	st.Log = service.NewLoggerFromSlog(slog.New(slog.NewTextHandler(logs, &slog.HandlerOptions{Level: slog.LevelInfo})))
	r := New(st, consumer.Shard{ID: shard}, take.Lease, source.Start{IterType: types.ShardIteratorTypeTrimHorizon})
	go r.Run()
	t.Cleanup(func() {
		cancel()
		<-r.Done()
	})
	h := &poisonHarness{r: r, out: out, store: store, shard: shard}

	// Record 3 is poison: the output names it among processed records,
	// and then it fails alone, again and again.
	b := h.next(t, 10*time.Second)
	require.Len(t, b.Records, 10)
	errs := make([]error, 10)
	errs[2] = errPoison
	b.AckRecords(errs)
	start := time.Now()
	var firstBehind int64
	failures := 1
	for time.Since(start) < 1300*time.Millisecond {
		again := h.next(t, 10*time.Second)
		require.Len(t, again.Records, 1)
		again.Ack(errPoison)
		failures++
		if firstBehind == 0 && time.Since(start) > 200*time.Millisecond {
			firstBehind = h.metric(consumer.MetricMillisBehind)
		}
	}
	elapsed := time.Since(start)
	// The gauge is set every commit_period (50 ms here) while it waits.
	time.Sleep(2 * cfg.CommitPeriod)
	lastBehind := h.metric(consumer.MetricMillisBehind)
	t.Logf("%d failures in %v; %s: %d ms, then %d ms", failures, elapsed, consumer.MetricMillisBehind, firstBehind, lastBehind)
	assert.GreaterOrEqual(t, firstBehind, age.Milliseconds(), "the gauge is the age of the record the shard waits for")
	assert.Greater(t, lastBehind, firstBehind+800, "the gauge grows while the shard waits")

	seq := consumertest.SeqOf(shard, 3)
	var warns []string
	for _, l := range strings.Split(logs.String(), "\n") {
		if strings.Contains(l, "level=WARN") && strings.Contains(l, seq) {
			warns = append(warns, l)
		}
	}
	t.Logf("%d WARNs naming %s, e.g. %s", len(warns), seq, firstOr(warns))
	require.NotEmpty(t, warns, "a WARN names the record the shard waits for")
	assert.Contains(t, warns[0], "stream s")
	assert.Contains(t, warns[0], shard)
	windows := int(elapsed/blockedWarnInterval) + 1
	assert.LessOrEqual(t, len(warns), windows, "at most one WARN per interval, not one per failure (%d failures)", failures)
	assert.GreaterOrEqual(t, len(warns), 2, "the WARN comes again while the shard stays blocked")
}

func firstOr(s []string) string {
	if len(s) == 0 {
		return "(none)"
	}
	return s[0]
}
