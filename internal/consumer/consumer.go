package consumer

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"os"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/redpanda-data/benthos/v4/public/service"

	"github.com/connect-kinesis/connect-kinesis/internal/kinesisx"
)

// Config is the parsed behaviour of the consumer.
type Config struct {
	Streams          []string
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
}

// Validate names the field that is out of range and what it accepts.
func (c Config) Validate() error {
	switch {
	case len(c.Streams) == 0:
		return errors.New("field streams: list at least one stream name or ARN")
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
	// lastOfAggregate marks the last user record of its aggregate: a batch
	// ending there covers the whole record.
	lastOfAggregate bool
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

	reader *shardReader
	id     uint64
	// ids are the tracker entries of a lane batch, one per record; a
	// batch of the reader's own path has one entry, id.
	ids []uint64
	// redelivering is set while the reader sends the batch again after a
	// nack and waits for the verdict on verdict.
	redelivering atomic.Bool
	verdict      chan error
	// charge is what the batch's records cost the input's byte budget,
	// given back once, when the batch is acked.
	charge atomic.Int64
	// inPipeline says charge is counted in the reader's budget as handed
	// to the pipeline; guarded by that shardBudget's mu.
	inPipeline bool
}

// Ack reports the pipeline's verdict. A nil err advances the checkpoint
// (once every earlier batch is acked too); an error makes the consumer send
// the batch again.
func (b *Batch) Ack(err error) {
	if err == nil {
		if b.ids != nil {
			b.reader.tracker.ackAll(b.ids)
		} else {
			b.reader.tracker.ack(b.id)
		}
		b.reader.budget.release(b)
	} else {
		b.reader.budget.returned(b)
	}
	if b.redelivering.Load() {
		select {
		case b.verdict <- err:
		default:
		}
		return
	}
	if err != nil {
		b.reader.nack(b)
	}
}

// Consumer reads every configured stream.
type Consumer struct {
	cfg     Config
	api     KinesisAPI
	stores  func(streamID string) Store
	log     *service.Logger
	metrics *metrics
	owner   string
	out     chan *Batch
	// budget bounds what every reader holds together; nil without a bound.
	budget *budget

	mu      sync.Mutex
	coords  []*coordinator
	cancel  context.CancelFunc
	wg      sync.WaitGroup
	started bool
}

// New builds a consumer. stores returns the Store of a stream given its
// identity (the ARN, or the name when the service gives no ARN).
func New(cfg Config, api KinesisAPI, stores func(streamID string) Store, log *service.Logger, m *service.Metrics) (*Consumer, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	c := &Consumer{
		cfg:     cfg,
		api:     api,
		stores:  stores,
		log:     log,
		metrics: newMetrics(m),
		owner:   cmp.Or(cfg.InstanceID, InstanceID()),
		out:     make(chan *Batch),
	}
	if cfg.MaxBufferedBytes > 0 {
		c.budget = newBudget(cfg.MaxBufferedBytes, c.metrics)
	}
	return c, nil
}

// InstanceID names this process among the members of a group: host, pid
// and a random suffix, so two consumers in one process differ too.
func InstanceID() string {
	host, err := os.Hostname()
	if err != nil || host == "" {
		host = "unknown"
	}
	return host + "-" + strconv.Itoa(os.Getpid()) + "-" + randomSuffix()
}

// Owner is this consumer's member id.
func (c *Consumer) Owner() string { return c.owner }

// Batches delivers batches in per-shard order, without the lease check of
// Next; tests that need no such check read it directly.
func (c *Consumer) Batches() <-chan *Batch { return c.out }

// Next returns the next batch, in per-shard order, until ctx ends. A batch
// whose lease passed its local deadline while it waited for this call (the
// process was paused) is not returned: it goes back to its reader, which
// hands it over again once a renewal confirms the lease, or drops it when
// the lease is lost. Nor is a batch whose lease was lost before its
// deadline (an operator's reset, a recreated stream, a re-seed finding the
// shard taken): a reader's send and its ending can both be ready at once.
func (c *Consumer) Next(ctx context.Context) (*Batch, error) {
	for {
		select {
		case b := <-c.out:
			if b.reader.lost.Load() {
				b.reader.bounce(b)
				continue
			}
			if b.reader.leaseLive() {
				return b, nil
			}
			b.reader.bounce(b)
		case <-ctx.Done():
			return nil, ctx.Err()
		}
	}
}

// Start resolves every stream (failing if one cannot be described) and
// starts reading in the background until Close.
func (c *Consumer) Start(ctx context.Context) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.started {
		return nil
	}
	var coords []*coordinator
	for _, name := range c.cfg.Streams {
		co, err := newCoordinator(ctx, c, name)
		if err != nil {
			return err
		}
		coords = append(coords, co)
	}
	// A name and the ARN of one stream resolve to one identity: listed
	// both ways, every record would be read twice.
	seen := map[string]string{}
	for _, co := range coords {
		if first, dup := seen[co.id]; dup {
			return fmt.Errorf("field streams: %q and %q are the same stream (%s), so every record would be read twice; list it once", first, co.configured, co.id)
		}
		seen[co.id] = co.configured
	}
	runCtx, cancel := context.WithCancel(context.WithoutCancel(ctx))
	c.coords, c.cancel, c.started = coords, cancel, true
	for _, co := range coords {
		c.wg.Add(1)
		go func() {
			defer c.wg.Done()
			co.run(runCtx)
		}()
	}
	if c.budget != nil {
		c.wg.Add(1)
		go func() {
			defer c.wg.Done()
			c.watchBudget(runCtx, c.budgetWarnAfter(coords), budgetEpisodeGap, budgetCheckInterval)
		}()
	}
	return nil
}
