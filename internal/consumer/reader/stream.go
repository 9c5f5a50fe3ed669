package reader

import (
	"context"
	"time"

	"github.com/connect-kinesis/connect-kinesis/internal/consumer"
	"github.com/connect-kinesis/connect-kinesis/internal/consumer/budget"
	"github.com/connect-kinesis/connect-kinesis/internal/consumer/source"
	"github.com/redpanda-data/benthos/v4/public/service"
)

// Stream is what a reader is given of its stream by the coordinator, and
// the only way it reaches back: the coordinator starts readers, renews
// their leases and hears when they finish; a reader never reaches into the
// coordinator's state.
type Stream struct {
	// Name is the stream's name, for metrics, logs and batches.
	Name    string
	Config  *consumer.Config
	Metrics *consumer.Metrics
	Store   consumer.Store
	// Log is the stream's logger; a reader adds its shard.
	Log *service.Logger
	// Out is where batches go to the pipeline (coordinator.Consumer.Next, which asks each Batch to Admit itself).
	Out chan<- *consumer.Batch
	// Budget bounds what every reader holds together; nil: no bound.
	Budget *budget.Budget
	// Push says the sources are subscriptions (enhanced fan-out): an
	// event cannot be asked to be smaller.
	Push bool
	// Thresholds returns the lag thresholds: lag_warn_threshold (or half
	// the retention) and the retention, 0 when none is known (yet: a
	// stream found by discovery learns its retention after it started).
	// nil: none.
	Thresholds func() (lagWarn, retention time.Duration)
	// Ctx ends every reader of the stream at once.
	Ctx context.Context
	// OpenSource opens a shard's record source at from, filling room.
	OpenSource func(shard string, from source.Start, log *service.Logger, room source.Room) source.RecordSource
	// NotFound tells what a shard Kinesis did not find has become.
	NotFound func(ctx context.Context, shard string) source.NotFoundCause
	// RequestDiscovery asks the coordinator to list the shards now (a
	// shard ended, or the stream is gone).
	RequestDiscovery func()
	// Committed tells the coordinator a checkpoint landed under token.
	Committed func(shard string, pos consumer.Position, token int64)
	// Marker stores how far the readers may deliver their shards before
	// they deliver (the redelivery mark); nil: the store keeps no marks.
	Marker consumer.Marker
	// Processed is when the input's pipeline last processed a record,
	// shared by every stream of the input: a record failing alone is
	// charged only on that evidence that the downstream is up
	// (isolate.go). nil: each reader keeps its own.
	Processed *Processed
	// ShuttingDown says the instance is stopping, rather than handing a
	// shard off while it goes on.
	ShuttingDown func() bool
}
