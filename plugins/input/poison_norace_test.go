//go:build !race

package input

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/kinesis"
	"github.com/aws/aws-sdk-go-v2/service/kinesis/types"

	"github.com/redpanda-data/benthos/v4/public/service"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/connect-kinesis/connect-kinesis/internal/consumer"
	"github.com/connect-kinesis/connect-kinesis/internal/testenv"
)

// labelledGauges is a Benthos metrics exporter that keeps each gauge's
// last value by name and label values.
type labelledGauges struct {
	mu   sync.Mutex
	last map[string]int64
}

var poisonGauges = &labelledGauges{last: map[string]int64{}}

func init() {
	service.MustRegisterMetricsExporter("input_test_labelled", service.NewConfigSpec(),
		func(*service.ParsedConfig, *service.Logger) (service.MetricsExporter, error) {
			return poisonGauges, nil
		})
}

type labelledGauge struct {
	e   *labelledGauges
	key string
}

func (g labelledGauge) Set(n int64) {
	g.e.mu.Lock()
	defer g.e.mu.Unlock()
	g.e.last[g.key] = n
}
func (labelledGauge) Incr(int64)   {}
func (labelledGauge) Timing(int64) {}

func (e *labelledGauges) NewCounterCtor(string, ...string) service.MetricsExporterCounterCtor {
	return func(...string) service.MetricsExporterCounter { return labelledGauge{} }
}
func (e *labelledGauges) NewTimerCtor(string, ...string) service.MetricsExporterTimerCtor {
	return func(...string) service.MetricsExporterTimer { return labelledGauge{} }
}
func (e *labelledGauges) NewGaugeCtor(name string, _ ...string) service.MetricsExporterGaugeCtor {
	return func(vals ...string) service.MetricsExporterGauge {
		return labelledGauge{e, name + "{" + strings.Join(vals, ",") + "}"}
	}
}
func (*labelledGauges) Close(context.Context) error { return nil }

// get is the gauge's value by the label values the input gives it (Benthos
// puts the component's label and path before them).
func (e *labelledGauges) get(name string, vals ...string) int64 {
	e.mu.Lock()
	defer e.mu.Unlock()
	suffix := "," + strings.Join(vals, ",") + "}"
	for k, v := range e.last {
		if strings.HasPrefix(k, name+"{") && strings.HasSuffix(k, suffix) {
			return v
		}
	}
	return 0
}

// poisonOutput is the pipeline's output of the poison tests: it fails every
// message whose body holds "poison", naming them (a batch error) or, with
// plain, failing the whole batch with a plain error; it keeps what it took.
type poisonOutput struct {
	plain    bool
	mu       sync.Mutex
	took     map[string]int // body -> acknowledged writes
	seen     map[string]int // body -> deliveries
	attempts map[string][]string
}

func newPoisonOutput(plain bool) *poisonOutput {
	return &poisonOutput{plain: plain, took: map[string]int{}, seen: map[string]int{}, attempts: map[string][]string{}}
}

func (p *poisonOutput) write(_ context.Context, b service.MessageBatch) error {
	p.mu.Lock()
	defer p.mu.Unlock()
	var bErr *service.BatchError
	for i, m := range b {
		body, _ := m.AsBytes()
		p.seen[string(body)]++
		attempt, _ := m.MetaGet(MetaDeliveryAttempt)
		p.attempts[string(body)] = append(p.attempts[string(body)], attempt)
		if !strings.Contains(string(body), "poison") {
			continue
		}
		if p.plain {
			return errors.New("the sink refused a record")
		}
		if bErr == nil {
			bErr = service.NewBatchError(b, errors.New("the sink refused some records"))
		}
		bErr.Failed(i, fmt.Errorf("the sink refused %s", body))
	}
	if bErr != nil {
		for _, m := range b {
			body, _ := m.AsBytes()
			if !strings.Contains(string(body), "poison") {
				p.took[string(body)]++
			}
		}
		return bErr
	}
	for _, m := range b {
		body, _ := m.AsBytes()
		p.took[string(body)]++
	}
	return nil
}

func (p *poisonOutput) state() (took, seen map[string]int) {
	p.mu.Lock()
	defer p.mu.Unlock()
	took, seen = map[string]int{}, map[string]int{}
	for k, v := range p.took {
		took[k] = v
	}
	for k, v := range p.seen {
		seen[k] = v
	}
	return took, seen
}

// startPoisonStream runs the kinesis input into sink, with a dead-letter
// output resource `dlq` that keeps what it took in dlq.
func startPoisonStream(t *testing.T, inYAML string, sink *poisonOutput, dlq *captureSink) *runningStream {
	t.Helper()
	env := service.NewEnvironment()
	require.NoError(t, env.RegisterBatchOutput("poison_dlq", service.NewConfigSpec(),
		func(*service.ParsedConfig, *service.Resources) (service.BatchOutput, service.BatchPolicy, int, error) {
			return dlq, service.BatchPolicy{}, 1, nil
		}))
	sb := env.NewStreamBuilder()
	require.NoError(t, sb.SetLoggerYAML("level: warn"))
	require.NoError(t, sb.SetMetricsYAML("input_test_labelled: {}"))
	require.NoError(t, sb.AddInputYAML(inYAML))
	require.NoError(t, sb.AddBatchConsumerFunc(sink.write))
	require.NoError(t, sb.AddResourcesYAML(`output_resources:
  - label: dlq
    poison_dlq: {}`))
	s, err := sb.Build()
	require.NoError(t, err)
	rs := &runningStream{stream: s, done: make(chan error, 1)}
	go func() { rs.done <- s.Run(context.Background()) }()
	t.Cleanup(func() { rs.stop(t) })
	return rs
}

// writePoisonLoad writes n records over keys k0..k49, five of them poison
// (bodies "poison-<i>"), the rest "r<i>", and returns the poison bodies.
func writePoisonLoad(t *testing.T, emu *testenv.Kinesis, stream string, n int) []string {
	keys, payloads := make([]string, n), make([]string, n)
	var poison []string
	for i := range n {
		keys[i], payloads[i] = fmt.Sprintf("k%d", i%50), fmt.Sprintf("r%05d", i)
		if i%1000 == 500 {
			payloads[i] = fmt.Sprintf("poison-%05d", i)
			poison = append(poison, payloads[i])
		}
	}
	for i := 0; i < n; i += 500 {
		putRecords(t, emu.Client(), stream, keys[i:i+500], payloads[i:i+500])
	}
	return poison
}

// Five poison records among 5,000 on 4 shards, with the policy: every
// good record is taken once, the five are in the dead letter with their
// metadata after max_attempts failures each, and every shard's checkpoint
// reaches its last record. The output names its failures (a batch error)
// in one run, and fails whole batches (isolation by halving) in the other.
func TestIntegrationPoisonRecordsGoToTheDeadLetter(t *testing.T) {
	t.Parallel()
	emu := testenv.NewKinesisMock(t)
	red := testenv.NewRedis(t)
	for _, plain := range []bool{false, true} {
		t.Run(fmt.Sprintf("plain errors %t", plain), func(t *testing.T) {
			stream := fmt.Sprintf("poison-%t", plain)
			const n = 5000
			arn := emu.MustCreateStream(t, stream, 4)
			poison := writePoisonLoad(t, emu, stream, n)
			// The dead letter fails its first writes (it is down): the
			// shards wait and retry, and nothing is lost.
			sink, dlq := newPoisonOutput(plain), &captureSink{fail: 3}
			extra := `  limit: 500
  redelivery:
    max_attempts: 3
    dead_letter: dlq
`
			rs := startPoisonStream(t, inputYAML(stream, emu.Endpoint, red.URL(), "g-"+stream, extra), sink, dlq)
			require.Eventually(t, func() bool {
				took, _ := sink.state()
				dlq.mu.Lock()
				dead := len(dlq.got)
				dlq.mu.Unlock()
				return len(took) == n-len(poison) && dead == len(poison)
			}, 90*time.Second, 200*time.Millisecond)
			// Every shard's checkpoint reaches its last record once the
			// dead-lettered ones count as done.
			require.Eventually(t, func() bool {
				ps := checkpoints(t, red.URL(), "g-"+stream, arn)
				for _, last := range lastSequences(t, emu, stream) {
					if p, ok := ps[last.shard]; !ok || p.Compare(consumer.Position{Sequence: last.seq}) < 0 {
						return false
					}
				}
				return true
			}, 30*time.Second, 200*time.Millisecond)
			rs.stop(t)

			took, seen := sink.state()
			extraDeliveries, mostExtra := 0, 0
			for body, k := range took {
				assert.Equal(t, 1, k, "%s taken once", body)
				extraDeliveries += seen[body] - 1
				mostExtra = max(mostExtra, seen[body]-1)
			}
			assert.LessOrEqual(t, mostExtra, 10, "at most ceil(log2 500) + 1 extra deliveries of a good record")
			for _, body := range poison {
				assert.Zero(t, took[body], "%s never taken", body)
				if plain {
					// Halving a batch of 500 to the record takes up to
					// ceil(log2 500) = 9 deliveries after the first;
					// then it fails alone max_attempts times.
					assert.LessOrEqual(t, seen[body], 1+9+3, "%s delivered while halving, then max_attempts times alone", body)
				} else {
					assert.Equal(t, 3, seen[body], "%s delivered max_attempts times", body)
				}
			}
			dlq.mu.Lock()
			defer dlq.mu.Unlock()
			var dead []string
			for _, m := range dlq.got {
				body, _ := m.AsBytes()
				dead = append(dead, string(body))
				meta := map[string]string{}
				require.NoError(t, m.MetaWalk(func(k, v string) error { meta[k] = v; return nil }))
				assert.Equal(t, stream, meta[MetaStream])
				assert.NotEmpty(t, meta[MetaShard])
				assert.NotEmpty(t, meta[MetaSequenceNumber])
				assert.NotEmpty(t, meta[MetaPartitionKey])
				assert.NotEmpty(t, meta[MetaArrival])
				assert.Equal(t, "3", meta[MetaFailedAttempts])
				if !plain {
					assert.Equal(t, "3", meta[MetaDeliveryAttempt])
				}
				assert.Equal(t, consumer.DeadLetterMaxAttempts, meta[MetaDeadLetterReason])
				assert.Contains(t, meta[MetaLastError], "refused")
				assert.NotEmpty(t, meta[MetaDeadLetteredAt])
				assert.Equal(t, "g-"+stream, meta[MetaGroup])
			}
			assert.ElementsMatch(t, poison, dead, "the dead letter holds the poison records, once each")
			t.Logf("%d good records taken once; %d extra deliveries of good records (at most %d of one); %d in the dead letter", len(took), extraDeliveries, mostExtra, len(dead))
			if !plain {
				assert.Zero(t, extraDeliveries, "a named failure redelivers only the failed records")
			}
		})
	}
}

// Without the policy a poison record blocks its shard, and only its
// shard: the others are read to their end, the blocked shard's checkpoint
// stays before the poison record, and the gauge of the oldest record
// waiting for a redelivery grows.
func TestIntegrationPoisonRecordBlocksOnlyItsShardWithoutThePolicy(t *testing.T) {
	t.Parallel()
	emu := testenv.NewKinesisMock(t)
	red := testenv.NewRedis(t)
	const stream, n = "poison-blocks", 2000
	arn := emu.MustCreateStream(t, stream, 4)
	keys, payloads := make([]string, n), make([]string, n)
	for i := range n {
		keys[i], payloads[i] = fmt.Sprintf("k%d", i%50), fmt.Sprintf("r%05d", i)
	}
	payloads[700] = "poison-00700"
	putRecords(t, emu.Client(), stream, keys, payloads)
	sink, dlq := newPoisonOutput(false), &captureSink{}
	rs := startPoisonStream(t, inputYAML(stream, emu.Endpoint, red.URL(), "g", "  limit: 100\n"), sink, dlq)

	var blocked string
	require.Eventually(t, func() bool {
		sink.mu.Lock()
		defer sink.mu.Unlock()
		return sink.seen["poison-00700"] >= 3
	}, 60*time.Second, 100*time.Millisecond)
	lasts := lastSequences(t, emu, stream)
	require.Eventually(t, func() bool {
		ps := checkpoints(t, red.URL(), "g", arn)
		done := 0
		for _, last := range lasts {
			if p, ok := ps[last.shard]; ok && p.Compare(consumer.Position{Sequence: last.seq}) >= 0 {
				done++
			} else {
				blocked = last.shard
			}
		}
		return done == len(lasts)-1
	}, 60*time.Second, 200*time.Millisecond, "every shard but the poisoned one is read to its end")
	require.Eventually(t, func() bool {
		return poisonGauges.get("kinesis_input_redelivery_oldest_seconds", stream, blocked) >= 2
	}, 30*time.Second, 200*time.Millisecond, "the gauge shows shard %s blocked", blocked)
	took, seen := sink.state()
	rs.stop(t)
	assert.Zero(t, took["poison-00700"])
	assert.GreaterOrEqual(t, seen["poison-00700"], 3, "retried, never skipped")
	dlq.mu.Lock()
	assert.Empty(t, dlq.got, "nothing goes to a dead letter without the policy")
	dlq.mu.Unlock()
	// Everything the blocked shard holds after the poison record waits:
	// its checkpoint is before the poison record.
	ps := checkpoints(t, red.URL(), "g", arn)
	for _, last := range lasts {
		if last.shard == blocked {
			p, ok := ps[blocked]
			assert.True(t, !ok || p.Compare(consumer.Position{Sequence: last.seq}) < 0, "shard %s checkpoint %v stays before its end", blocked, p)
		}
	}
	t.Logf("shard %s blocked; poison record delivered %d times; %d of %d good records taken", blocked, seen["poison-00700"], len(took), n-1)
}

// shardLast is a shard's last record.
type shardLast struct{ shard, seq string }

// lastSequences reads every shard of stream to its last record.
func lastSequences(t *testing.T, emu *testenv.Kinesis, stream string) []shardLast {
	t.Helper()
	c := emu.Client()
	var out []shardLast
	for _, sh := range allShards(t, c, stream) {
		it, err := c.GetShardIterator(t.Context(), &kinesis.GetShardIteratorInput{StreamName: aws.String(stream),
			ShardId: sh.ShardId, ShardIteratorType: types.ShardIteratorTypeTrimHorizon})
		require.NoError(t, err)
		iter, last := it.ShardIterator, ""
		for iter != nil {
			res, err := c.GetRecords(t.Context(), &kinesis.GetRecordsInput{ShardIterator: iter, Limit: aws.Int32(10000)})
			require.NoError(t, err)
			if len(res.Records) == 0 {
				break
			}
			last = aws.ToString(res.Records[len(res.Records)-1].SequenceNumber)
			iter = res.NextShardIterator
		}
		if last != "" {
			out = append(out, shardLast{shard: aws.ToString(sh.ShardId), seq: last})
		}
	}
	return out
}
