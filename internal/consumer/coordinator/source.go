package coordinator

import (
	"context"
	"time"

	"github.com/redpanda-data/benthos/v4/public/service"

	"github.com/connect-kinesis/connect-kinesis/internal/consumer"
	"github.com/connect-kinesis/connect-kinesis/internal/consumer/reader"
	"github.com/connect-kinesis/connect-kinesis/internal/consumer/source"
)

// readerStream is what the coordinator gives each of its readers (the
// door between them): the stream's settings and store, where batches go,
// how to open a shard's record source, and the few things a reader tells
// the coordinator. Built once, when the run loop starts.
func (co *coordinator) readerStream() *reader.Stream {
	return &reader.Stream{
		Name:       co.streamName,
		Config:     &co.c.cfg,
		Metrics:    co.c.metrics,
		Store:      co.store,
		Log:        co.log,
		Out:        co.c.out,
		Budget:     co.c.budget,
		Processed:  &co.c.processed,
		Push:       co.fanOut != nil,
		Thresholds: co.lag,
		Ctx:        co.runCtx,
		OpenSource: co.newSource,
		NotFound: func(ctx context.Context, shard string) source.NotFoundCause {
			return source.NotFound(ctx, co.api, co.configured, shard, co.listRetry, co.recreatedSince)
		},
		RequestDiscovery: co.requestDiscovery,
		Committed: func(shard string, pos consumer.Position, token int64) {
			co.known.committedTo(shard, pos, token)
		},
		ShuttingDown: co.shuttingDown,
		Marker:       co.marker(),
	}
}

// marker starts this instance's writer of the stream's redelivery marks,
// for the run, when the store keeps marks; nil otherwise.
func (co *coordinator) marker() consumer.Marker {
	if co.c.cfg.Redelivery.SkipMark {
		return nil
	}
	st := co.store
	if w, ok := st.(forgetWatch); ok {
		st = w.Store
	}
	ms, ok := st.(consumer.MarkingStore)
	if !ok {
		return nil
	}
	return ms.Marks(co.runCtx, co.c.owner)
}

// newSource opens the record source of a shard: a subscription with
// enhanced fan-out, else GetRecords polling.
func (co *coordinator) newSource(shard string, from source.Start, log *service.Logger, room source.Room) source.RecordSource {
	return source.New(source.Params{
		API:       co.api,
		Stream:    co.configured,
		Shard:     shard,
		From:      from,
		Config:    &co.c.cfg,
		Log:       log,
		Room:      room,
		OnExpired: func() { co.c.metrics.Expired.Incr(1, co.streamName) },
		OnAnswer:  func(t time.Time) { co.lastRead.Store(shard, t) },
	}, co.fanOut)
}
