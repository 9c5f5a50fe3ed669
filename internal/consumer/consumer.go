package consumer

import (
	"errors"
	"fmt"
	"os"
	"strconv"
	"time"

	"github.com/connect-kinesis/connect-kinesis/internal/kinesisx"
)

// Config is the parsed behaviour of the consumer.
type Config struct {
	Streams []string
	// FollowStreams: more streams are added and removed while the
	// consumer runs (Consumer.Follow: patterns of `streams`), so Streams,
	// the ones named, may be empty.
	FollowStreams    bool
	StartPosition    string
	StartTimestamp   time.Time
	ShardMaxInFlight int
	// ShardParallelism spreads a shard's records over that many lanes by
	// partition key, each with one batch in flight (lanes.go); 0 and 1
	// mean one lane, the reader's own path.
	ShardParallelism  int
	Limit             int
	PollInterval      time.Duration
	IdlePollInterval  time.Duration
	DiscoveryInterval time.Duration
	Deaggregate       bool
	// InstanceID names this consumer among the group's members; empty
	// means InstanceID().
	InstanceID string
	// LagWarnThreshold 0 means half the stream's retention period.
	LagWarnThreshold time.Duration

	CommitPeriod    time.Duration
	LeasePeriod     time.Duration
	RebalancePeriod time.Duration
	HandoffTimeout  time.Duration
	// Balance is what balancing evens out between members: BalanceLoad
	// (bytes/s, the default when empty) or BalanceCount (shards).
	Balance BalanceMode

	// EnhancedFanOut, when enabled, reads shards with SubscribeToShard
	// instead of GetRecords polling (subscription.go, efo_resolve.go).
	EnhancedFanOut EnhancedFanOut

	Backoff kinesisx.Backoff

	// MaxBufferedBytes bounds the bytes of records the consumer holds, all
	// streams and shards together (budget.go); 0 means no bound.
	MaxBufferedBytes int64

	// Redelivery is the failure policy for nacked records; its zero value
	// redelivers a nacked batch whole, forever.
	Redelivery Redelivery
}

// Validate names the field that is out of range and what it accepts.
func (c Config) Validate() error {
	switch {
	case len(c.Streams) == 0 && !c.FollowStreams:
		return errors.New("field streams: list at least one stream name or ARN")
	case c.FollowStreams && c.EnhancedFanOut.ConsumerARN != "":
		return errors.New("field enhanced_fan_out.consumer_arn: a consumer belongs to one stream, but a pattern of streams finds several; use enhanced_fan_out.consumer_name instead")
	case c.StartPosition != StartTrimHorizon && c.StartPosition != StartLatest && c.StartPosition != StartAtTimestamp:
		return fmt.Errorf("field start_position: %q is not one of trim_horizon, latest, at_timestamp", c.StartPosition)
	case c.StartPosition == StartAtTimestamp && c.StartTimestamp.IsZero():
		return errors.New("field start_timestamp: required (RFC3339) when start_position is at_timestamp")
	case c.ShardMaxInFlight < 1:
		return fmt.Errorf("field shard_max_in_flight: %d must be at least 1", c.ShardMaxInFlight)
	case c.ShardParallelism < 0 || c.ShardParallelism > MaxShardParallelism:
		return fmt.Errorf("field shard_parallelism: %d must be within 1..%d", c.ShardParallelism, MaxShardParallelism)
	case c.ShardParallelism > 1 && c.ShardMaxInFlight > 1:
		return fmt.Errorf("fields shard_parallelism (%d) and shard_max_in_flight (%d): set shard_max_in_flight to 1 with shard_parallelism above 1; each lane keeps one batch in flight so that every partition key stays in order, and more batches per shard would give that order up", c.ShardParallelism, c.ShardMaxInFlight)
	case c.Limit < 1 || c.Limit > kinesisx.MaxGetRecordsLimit:
		return fmt.Errorf("field limit: %d must be within 1..%d", c.Limit, kinesisx.MaxGetRecordsLimit)
	case c.PollInterval < kinesisx.MinPollInterval:
		return fmt.Errorf("field poll_interval: %v is below %v, which would exceed %d GetRecords calls per second per shard", c.PollInterval, kinesisx.MinPollInterval, kinesisx.MaxGetRecordsPerSecond)
	case c.IdlePollInterval < c.PollInterval:
		return fmt.Errorf("field idle_poll_interval: %v must be at least poll_interval (%v)", c.IdlePollInterval, c.PollInterval)
	case c.DiscoveryInterval <= 0:
		return fmt.Errorf("field shard_discovery_interval: %v must be positive, e.g. 10s", c.DiscoveryInterval)
	case c.LagWarnThreshold < 0:
		return fmt.Errorf("field lag_warn_threshold: %v is negative; use 0s for half the stream's retention or a positive duration", c.LagWarnThreshold)
	case c.CommitPeriod <= 0 || c.LeasePeriod <= 0 || c.RebalancePeriod <= 0:
		return errors.New("fields checkpoint.commit_period, lease.period and lease.rebalance_period must be positive")
	case c.MaxBufferedBytes < 0:
		return fmt.Errorf("field max_buffered_bytes: %d is negative; use a size such as 256MiB, or 0 for no bound", c.MaxBufferedBytes)
	case c.Balance != "" && c.Balance != BalanceLoad && c.Balance != BalanceCount:
		return fmt.Errorf("field lease.balance: %q is not one of %s, %s", c.Balance, BalanceLoad, BalanceCount)
	}
	if err := c.Redelivery.validate(); err != nil {
		return err
	}
	return c.EnhancedFanOut.validate(c.Streams)
}

// Record is one user record, after KPL de-aggregation.
type Record struct {
	PartitionKey string
	Data         []byte
	Sequence     string
	SubSequence  int64
	// Aggregated is true for a user record taken out of a KPL aggregate.
	Aggregated bool
	Arrival    time.Time
	// LastOfAggregate marks the last user record of its aggregate: a batch
	// ending there covers the whole record.
	LastOfAggregate bool
}

// Position is the checkpoint that processing r allows: its sequence
// number, or "<seq>/<subseq>" for a user record of a KPL aggregate that is
// not the aggregate's last.
func (r Record) Position() Position {
	if r.Aggregated && !r.LastOfAggregate {
		return Position{Sequence: r.Sequence, SubSequence: r.SubSequence, HasSub: true}
	}
	return Position{Sequence: r.Sequence}
}

// Batch is the records of one answer of a shard's record source (a
// GetRecords response or a subscription event), or at most `limit` of them
// when de-aggregation made the answer longer. Exactly one of its Ack calls
// with a nil error marks it processed.
type Batch struct {
	Stream       string
	Shard        string
	Records      []Record
	MillisBehind int64
	// Attempts is each record's delivery attempt (see Attempt); nil on a
	// first delivery, when every record's is 1.
	Attempts []int
	// DeliveredBefore is the redelivery mark the shard's take read: an
	// earlier owner may have handed the records at or below it to the
	// pipeline (see Redelivered). Zero when none is known.
	DeliveredBefore Position

	delivery Delivery
}

// Delivery is the shard reader's side of a batch it hands over: the only
// door from the pipeline back into the reader.
type Delivery interface {
	// Ack reports the pipeline's verdict on the batch.
	Ack(err error)
	// Admit is asked right before the batch reaches the pipeline. It
	// refuses a batch whose lease was lost or passed its local deadline
	// while the batch waited (the process was paused), and the batch then
	// goes back to its reader: sent again once a renewal confirms the
	// lease, or dropped when the lease is lost. With shard_max_in_flight
	// above 1 it also refuses a batch behind an earlier refused one of its
	// shard until that one is admitted, so the shard's order holds.
	Admit() bool
}

// MakeBatch is a batch of a shard's records whose verdict goes to d.
func MakeBatch(stream, shard string, recs []Record, behind int64, d Delivery) Batch {
	return Batch{Stream: stream, Shard: shard, Records: recs, MillisBehind: behind, delivery: d}
}

// Ack reports the pipeline's verdict. A nil err advances the checkpoint
// (once every earlier batch is acked too); an error makes the consumer send
// the batch again.
func (b *Batch) Ack(err error) { b.delivery.Ack(err) }

// Admit says whether the batch may be handed to the pipeline now (see
// Delivery.Admit); a refused batch is its reader's again.
func (b *Batch) Admit() bool { return b.delivery.Admit() }

// InstanceID names this process among the members of a group: host, pid
// and a random suffix, so two consumers in one process differ too.
func InstanceID() string {
	host, err := os.Hostname()
	if err != nil || host == "" {
		host = "unknown"
	}
	return host + "-" + strconv.Itoa(os.Getpid()) + "-" + randomSuffix()
}

// MaxShardParallelism bounds shard_parallelism: past a few dozen lanes a
// shard's records are split into batches too small to be worth a round
// through the pipeline.
const MaxShardParallelism = 64
