package consumer

import (
	"context"
	"errors"
	"time"

	"github.com/aws/aws-sdk-go-v2/service/kinesis/types"
)

// A shard reader is two halves joined at one seam.
//
// A RecordSource fetches: it yields the records of one shard in sequence
// order, starting where it was told to (the shard's checkpoint, or the
// group's start position), and says when the shard has ended and which
// shards are its children. It owns everything about talking to Kinesis for
// that shard: pacing, retries with backoff (failsafe-go), and resuming after
// trouble. Polling (pollingSource: GetShardIterator, then GetRecords at most
// once per poll_interval, renewing an expired iterator) is one source.
// Enhanced fan-out is meant to be the second: SubscribeToShard from the
// same start, each event a SourceBatch, the subscription renewed every five
// minutes (and after an error) from its continuation sequence, ChildShards
// taken from the last event.
//
// The shardReader is the path every source shares: it turns records into
// user records (KPL de-aggregation, skipping what a checkpoint inside an
// aggregate already covers), hands them to Benthos, follows acks in the
// tracker, redelivers nacked batches, commits the contiguously acked
// position, and at the end closes the shard or releases its lease.
//
// The contract between the two:
//   - The reader calls Next only when the shard has room for another batch
//     (shard_max_in_flight), and delivers everything Next returned before
//     calling it again. So "after the last record returned" is "after the
//     last record delivered": that is where a source resumes when it must
//     start over (an expired iterator, a subscription renewed or broken).
//   - Next blocks until it has a batch, or ctx ends; it retries its own
//     trouble and returns an error only when ctx ends, or an error wrapping
//     ErrShardNotFound when Kinesis says the shard or its stream does not
//     exist. The reader then tells a trimmed shard (no longer listed: it
//     counts as closed) from a deleted stream (its readers stop) and may
//     call Next again when the shard is still listed.
//   - NextAt says when a pulling source will next call Kinesis. The reader
//     waits for that moment itself, so that acks and redeliveries are served
//     while it waits; a pushing source returns the zero time.
//   - A batch with End set is the last one: the shard is closed and every
//     record was returned. Next is not called again.
type RecordSource interface {
	Next(ctx context.Context) (SourceBatch, error)
	NextAt() time.Time
	// Close releases what the source holds (a subscription, a
	// connection). It is called once, when the reader stops reading.
	Close()
}

// ErrShardNotFound is wrapped by the error of a Next that Kinesis answered
// with ResourceNotFound: the shard was trimmed past the retention period,
// or the stream was deleted.
var ErrShardNotFound = errors.New("shard or stream not found")

// SourceBatch is what one Next yields: one GetRecords response, or one
// event of a subscription.
type SourceBatch struct {
	// Records are in sequence order; they may be empty.
	Records []types.Record
	// MillisBehindLatest is how far the shard's tip is ahead of Records.
	MillisBehindLatest int64
	// End is set when the shard is closed and read to its end.
	End bool
	// ChildShards are the shards that continue this one, set with End
	// (when the service reports them).
	ChildShards []types.ChildShard
}

// startSpec says where a shard reader begins.
type startSpec struct {
	// closeUnread closes the shard without reading it: its checkpoint is
	// already SHARD_END (read to its end and committed; only the closed set
	// lacks it).
	closeUnread bool

	iterType  types.ShardIteratorType
	sequence  string
	timestamp time.Time
	// skipSub drops the sub-records of `sequence` up to and including this
	// index: a checkpoint inside a KPL aggregated record.
	skipSub    int64
	hasSkipSub bool
}

// after is the start right after a record.
func after(sequence string) startSpec {
	return startSpec{iterType: types.ShardIteratorTypeAfterSequenceNumber, sequence: sequence}
}
