package reader

import (
	"context"
	"strconv"
	"testing"
	"time"

	"github.com/redpanda-data/benthos/v4/public/service"

	"github.com/connect-kinesis/connect-kinesis/internal/consumer"
	"github.com/connect-kinesis/connect-kinesis/internal/consumer/consumertest"
	"github.com/connect-kinesis/connect-kinesis/internal/consumer/source"
)

// testStream is the Stream of a reader with no coordinator behind it:
// polling sources over api, batches on out, nothing told back.
func testStream(ctx context.Context, cfg *consumer.Config, api consumer.KinesisAPI, st consumer.Store, out chan *consumer.Batch) *Stream {
	return &Stream{
		Name:    "s",
		Config:  cfg,
		Metrics: consumer.NewMetrics(nil),
		Store:   st,
		Out:     out,
		Ctx:     ctx,
		OpenSource: func(shard string, from source.Start, log *service.Logger, room source.Room) source.RecordSource {
			return source.New(source.Params{API: api, Stream: "s", Shard: shard, From: from, Config: cfg, Log: log, Room: room}, nil)
		},
		NotFound:         func(context.Context, string) source.NotFoundCause { return source.ShardStillListed },
		RequestDiscovery: func() {},
		Committed:        func(string, consumer.Position, int64) {},
		ShuttingDown:     func() bool { return false },
	}
}

// pastDeadlineReader is a reader of shard whose lease's local deadline has
// passed, over st, that is not running.
func pastDeadlineReader(t *testing.T, st consumer.Store, shard string) *Reader {
	t.Helper()
	cfg := consumertest.Config()
	s := testStream(t.Context(), &cfg, consumertest.NewKinesis(), st, make(chan *consumer.Batch))
	l := consumer.Lease{Shard: shard, Owner: "me", Token: 1, ExpiresAt: time.Now().Add(time.Minute), Deadline: time.Now().Add(-time.Second)}
	return New(s, consumer.Shard{ID: shard}, l, source.Start{})
}

func itoa(i int) string { return strconv.Itoa(i) }
