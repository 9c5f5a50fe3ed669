package coordinator

import (
	"context"
	"log/slog"
	"testing"
	"time"

	"github.com/redpanda-data/benthos/v4/public/service"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/connect-kinesis/connect-kinesis/internal/consumer"
	"github.com/connect-kinesis/connect-kinesis/internal/consumer/consumertest"
)

// refusingDelivery is a batch's reader side whose Admit always refuses.
type refusingDelivery struct{}

func (refusingDelivery) Ack(error)   {}
func (refusingDelivery) Admit() bool { return false }

// Guards the DEBUG line of a batch Admit refuses naming only a lost or
// lapsed lease: with shard_max_in_flight above 1 Admit also refuses, under a
// live lease, a batch behind an earlier refused one of its shard, and an
// operator reading the line would look for a lease problem that is not
// there.
func TestARefusedBatchIsLoggedWithEveryCauseOfARefusal(t *testing.T) {
	t.Parallel()
	logs := &consumertest.SyncBuffer{}
	log := service.NewLoggerFromSlog(slog.New(slog.NewTextHandler(logs, &slog.HandlerOptions{Level: slog.LevelDebug})))
	c, err := New(consumertest.Config(), consumertest.NewKinesis(), func(string) consumer.Store { return consumertest.NewStore(time.Minute) }, log, nil)
	require.NoError(t, err)
	b := consumer.MakeBatch("s", "shardId-000000000000", []consumer.Record{{Sequence: "1"}}, 0, refusingDelivery{})
	go func() { c.out <- &b }()
	ctx, cancel := context.WithTimeout(t.Context(), 500*time.Millisecond)
	defer cancel()
	_, err = c.Next(ctx)
	require.ErrorIs(t, err, context.DeadlineExceeded)
	assert.Contains(t, logs.String(), "was refused at admission")
	assert.Contains(t, logs.String(), "an earlier batch of the shard", "the line names the order refusal too")
}
