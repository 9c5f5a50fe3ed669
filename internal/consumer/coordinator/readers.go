package coordinator

import (
	"time"

	"github.com/redpanda-data/benthos/v4/public/service"

	"github.com/connect-kinesis/connect-kinesis/internal/consumer"
	"github.com/connect-kinesis/connect-kinesis/internal/consumer/reader"
)

// shardReader is what the coordinator sees of a shard's reader
// (*reader.Reader): it starts and stops it, renews or withdraws its lease,
// reads what it publishes, and hears how it ended. It never reaches into
// how the reader delivers, tracks acks or commits.
type shardReader interface {
	// Run reads until the reader ends; Done is closed then, and Outcome
	// says how it ended.
	Run()
	Done() <-chan struct{}
	Finished() bool
	Outcome() reader.Outcome
	// Stop starts a hand-back; Cancel ends the reader at once.
	Stop()
	Cancel()
	Stopping() bool
	// The lease: renewed or lost by the coordinator's renewals.
	Lease() consumer.Lease
	LeaseRenewed(l consumer.Lease)
	LeaseLive() bool
	MarkLost()
	Lost() bool
	Releasing() bool
	// RaiseDelivered raises the redelivery mark the reader marks against.
	RaiseDelivered(p consumer.Position)
	// What the coordinator publishes and re-seeds from.
	Checkpoint() (consumer.Position, bool)
	Progress(now time.Time, period time.Duration) (consumer.Progress, bool)
	Shard() consumer.Shard
	Log() *service.Logger
}

var _ shardReader = (*reader.Reader)(nil)
