//go:build !race

package input

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/redpanda-data/benthos/v4/public/service"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/connect-kinesis/connect-kinesis/internal/consumer"
)

// captureSink is an output resource that fails its first `fail` writes,
// blocks while `hold` is open (when set), and keeps what it took.
type captureSink struct {
	mu   sync.Mutex
	fail int
	hold chan struct{}
	got  service.MessageBatch
}

func (c *captureSink) Connect(context.Context) error { return nil }
func (c *captureSink) WriteBatch(ctx context.Context, b service.MessageBatch) error {
	if c.hold != nil {
		select {
		case <-c.hold:
		case <-ctx.Done():
			return ctx.Err()
		}
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.fail > 0 {
		c.fail--
		return errors.New("dead letter store unavailable")
	}
	c.got = append(c.got, b...)
	return nil
}
func (c *captureSink) Close(context.Context) error { return nil }

// blockingInput keeps a stream running and hands its resources out.
type blockingInput struct{ mgr chan *service.Resources }

func (blockingInput) Connect(context.Context) error { return nil }
func (blockingInput) ReadBatch(ctx context.Context) (service.MessageBatch, service.AckFunc, error) {
	<-ctx.Done()
	return nil, nil, ctx.Err()
}
func (blockingInput) Close(context.Context) error { return nil }

// The dead-letter write through a real output resource: a failed write is
// an error (the records stay undone, the shard waits and retries), an
// acknowledged one carries the record and its metadata, and a resource
// that never answers does not hold the caller past its ctx.
//
// Not under -race: Benthos v4.60.0 builds an output resource lazily on its
// first access while holding only a read lock (internal/manager,
// liveResource.RAccess writes l.res under l.m.RLock), so the detector
// reports that write against the stream's stop walking the resources.
// `make test` runs this test without the race detector (suite-norace).
func TestDeadLetterWritesThroughAnOutputResource(t *testing.T) {
	sink := &captureSink{fail: 1}
	stuck := &captureSink{hold: make(chan struct{})}
	mgrs := make(chan *service.Resources, 1)
	env := service.NewEnvironment()
	require.NoError(t, env.RegisterBatchInput("blocking", service.NewConfigSpec(),
		func(_ *service.ParsedConfig, mgr *service.Resources) (service.BatchInput, error) {
			mgrs <- mgr
			return blockingInput{}, nil
		}))
	for name, o := range map[string]*captureSink{"capture": sink, "stuck": stuck} {
		require.NoError(t, env.RegisterBatchOutput(name, service.NewConfigSpec(),
			func(*service.ParsedConfig, *service.Resources) (service.BatchOutput, service.BatchPolicy, int, error) {
				return o, service.BatchPolicy{}, 1, nil
			}))
	}
	b := env.NewStreamBuilder()
	require.NoError(t, b.SetYAML(`
input:
  blocking: {}
output:
  drop: {}
output_resources:
  - { label: dlq, capture: {} }
  - { label: stuck_dlq, stuck: {} }
`))
	s, err := b.Build()
	require.NoError(t, err)
	go func() { _ = s.Run(t.Context()) }()
	defer func() {
		close(stuck.hold)
		_ = s.StopWithin(5 * time.Second)
	}()
	mgr := <-mgrs
	for _, label := range []string{"dlq", "stuck_dlq"} {
		require.NoError(t, (&deadLetter{mgr: mgr, label: label}).prepare(t.Context()))
	}
	require.ErrorContains(t, (&deadLetter{mgr: mgr, label: "nope"}).prepare(t.Context()),
		`field redelivery.dead_letter: no output resource is labelled "nope"`)

	at := time.Date(2026, 12, 2, 21, 0, 0, 0, time.UTC)
	rec := consumer.DeadRecord{
		Record: consumer.Record{PartitionKey: "k1", Data: []byte(`{"poison":true}`), Sequence: "49590338271490256608559692538361571095921575989136588898",
			SubSequence: 3, Aggregated: true, Arrival: at.Add(-time.Hour)},
		Stream: "orders", Shard: "shardId-000000000001",
		Deliveries: 4, Failures: 3, LastError: "refused: too large", Reason: consumer.DeadLetterMaxAttempts, At: at,
	}
	ctx := t.Context()
	dl := &deadLetter{mgr: mgr, label: "dlq", group: "g"}
	err = dl.Write(ctx, []consumer.DeadRecord{rec})
	require.Error(t, err, "a failed write is never taken for done")
	assert.Contains(t, err.Error(), "dead letter store unavailable")
	require.NoError(t, dl.Write(ctx, []consumer.DeadRecord{rec}), "the retry lands")

	sink.mu.Lock()
	require.Len(t, sink.got, 1)
	m := sink.got[0]
	sink.mu.Unlock()
	body, err := m.AsBytes()
	require.NoError(t, err)
	assert.Equal(t, `{"poison":true}`, string(body), "the record as read")
	meta := map[string]string{}
	require.NoError(t, m.MetaWalk(func(k, v string) error { meta[k] = v; return nil }))
	assert.Equal(t, map[string]string{
		MetaStream: "orders", MetaShard: "shardId-000000000001", MetaPartitionKey: "k1",
		MetaSequenceNumber: rec.Sequence, MetaSubSequence: "3", MetaArrival: "2026-12-02T20:00:00Z",
		MetaDeliveryAttempt: "4", MetaFailedAttempts: "3", MetaLastError: "refused: too large",
		MetaDeadLetterReason: consumer.DeadLetterMaxAttempts, MetaDeadLetteredAt: "2026-12-02T21:00:00Z", MetaGroup: "g",
	}, meta)

	short, cancel := context.WithTimeout(ctx, 300*time.Millisecond)
	defer cancel()
	err = (&deadLetter{mgr: mgr, label: "stuck_dlq"}).Write(short, []consumer.DeadRecord{rec})
	require.ErrorIs(t, err, context.DeadlineExceeded, "a dead letter that never answers does not hold the shard's reader past its ctx")
}
