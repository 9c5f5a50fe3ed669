package input

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/redpanda-data/benthos/v4/public/service"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/connect-kinesis/connect-kinesis/internal/consumer"
	"github.com/connect-kinesis/connect-kinesis/internal/consumer/consumertest"
	"github.com/connect-kinesis/connect-kinesis/internal/testenv"
)

// markedDelivery is one message as the mark tests see it.
type markedDelivery struct {
	data, attempt string
	marked        bool
}

// markLog keeps every message a pipeline got, with its marks.
type markLog struct {
	mu  sync.Mutex
	all []markedDelivery
}

func (l *markLog) add(b service.MessageBatch) {
	l.mu.Lock()
	defer l.mu.Unlock()
	for _, m := range b {
		data, _ := m.AsBytes()
		attempt, _ := m.MetaGet(MetaDeliveryAttempt)
		mark, _ := m.MetaGet(MetaRedelivered)
		l.all = append(l.all, markedDelivery{data: string(data), attempt: attempt, marked: mark == "true"})
	}
}

func (l *markLog) snapshot() []markedDelivery {
	l.mu.Lock()
	defer l.mu.Unlock()
	return append([]markedDelivery(nil), l.all...)
}

// A record an earlier owner handed to its pipeline is delivered marked by
// the next owner, and only those: instance A's pipeline fails every batch
// (so nothing is committed) and A stops; instance B of the same group
// reads the shards from their start. Every record A got arrives at B with
// kinesis_redelivered "true", every record A never got without it, and
// each with kinesis_delivery_attempt 1 (B's first delivery). Within A, a
// batch it delivers again after a failure is marked and counts attempts.
//
// With redelivery.mark: false nothing is stored before delivery, and B
// marks nothing.
func TestIntegrationRedeliveryMarkCrossesOwners(t *testing.T) {
	t.Parallel()
	emu := testenv.NewKinesisMock(t)
	red := testenv.NewRedis(t)
	for _, mark := range []bool{true, false} {
		t.Run(fmt.Sprintf("mark %t", mark), func(t *testing.T) {
			markAcrossOwners(t, emu, red, mark)
		})
	}
}

func markAcrossOwners(t *testing.T, emu *testenv.Kinesis, red *testenv.Redis, mark bool) {
	stream := fmt.Sprintf("marks-%t", mark)
	const n = 1200
	emu.MustCreateStream(t, stream, 3)
	keys, payloads := make([]string, n), make([]string, n)
	for i := range n {
		keys[i], payloads[i] = fmt.Sprintf("k%d", i), fmt.Sprintf("r%05d", i)
	}
	putRecords(t, emu.Client(), stream, keys, payloads)
	yaml := inputYAML(stream, emu.Endpoint, red.URL(), "g-"+stream, fmt.Sprintf("  limit: 100\n  redelivery: { mark: %t }\n", mark))

	a := &markLog{}
	rsA := startStream(t, yaml, func(_ context.Context, b service.MessageBatch) error {
		a.add(b)
		return errors.New("the output is down")
	})
	// Each of the 3 shards' first batch (100 records) is delivered, then
	// parts of it again after its failure (halved: isolate is on).
	require.Eventually(t, func() bool {
		seen := map[string]int{}
		for _, d := range a.snapshot() {
			seen[d.data]++
		}
		again := 0
		for _, k := range seen {
			if k >= 2 {
				again++
			}
		}
		return len(seen) == 300 && again > 0
	}, 60*time.Second, 100*time.Millisecond)
	rsA.stop(t)

	gotA := map[string]bool{}
	for _, d := range a.snapshot() {
		if !gotA[d.data] {
			assert.Equal(t, "1", d.attempt, "%s: A's first delivery", d.data)
			assert.False(t, d.marked, "%s: nobody delivered it before A", d.data)
		} else {
			assert.True(t, d.marked, "%s: A delivers it again after a failure", d.data)
			assert.NotEqual(t, "1", d.attempt, "%s", d.data)
		}
		gotA[d.data] = true
	}

	b := &markLog{}
	// B's metrics go to the test exporter: kinesis_input_redelivered_total
	// must count what B marked.
	sb := service.NewStreamBuilder()
	require.NoError(t, sb.SetLoggerYAML("level: warn"))
	require.NoError(t, sb.SetMetricsYAML("consumer_test_gauges: {}"))
	require.NoError(t, sb.AddInputYAML(yaml))
	require.NoError(t, sb.AddBatchConsumerFunc(func(_ context.Context, mb service.MessageBatch) error {
		b.add(mb)
		return nil
	}))
	s, err := sb.Build()
	require.NoError(t, err)
	rsB := &runningStream{stream: s, done: make(chan error, 1)}
	go func() { rsB.done <- s.Run(context.Background()) }()
	t.Cleanup(func() { rsB.stop(t) })
	require.Eventually(t, func() bool { return len(b.snapshot()) >= n }, 60*time.Second, 100*time.Millisecond)
	marked, unmarked := 0, 0
	for _, d := range b.snapshot() {
		assert.Equal(t, "1", d.attempt, "%s: B's first delivery", d.data)
		assert.Equal(t, mark && gotA[d.data], d.marked, "%s: marked exactly when A had delivered it (and marks are on)", d.data)
		if d.marked {
			marked++
		} else {
			unmarked++
		}
	}
	t.Logf("A delivered %d records (then failed them); B delivered %d marked and %d unmarked", len(gotA), marked, unmarked)
	if mark {
		assert.Equal(t, len(gotA), marked)
	}
	// Guards the defect "kinesis_redelivered and kinesis_input_redelivered_total
	// count different things": the metric counted only redeliveries after
	// a nack, so B's marked deliveries after the takeover were not counted.
	counted := consumertest.Gauges.Sum(consumer.MetricRedelivered+"{", ","+stream+",", ","+consumer.RedeliveredMark+"}")
	t.Logf("%s{cause=mark} of B: %d (series %v)", consumer.MetricRedelivered, counted, consumertest.Gauges.Keys(consumer.MetricRedelivered))
	assert.EqualValues(t, marked, counted, "B's metric counts every delivery it marked")
	assert.Zero(t, consumertest.Gauges.Sum(consumer.MetricRedelivered+"{", ","+stream+",", ","+consumer.RedeliveredNack+"}"), "B failed nothing")
}
