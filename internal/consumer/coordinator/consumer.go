package coordinator

import (
	"cmp"
	"context"
	"fmt"
	"sync"
	"time"

	"github.com/connect-kinesis/connect-kinesis/internal/consumer"
	"github.com/connect-kinesis/connect-kinesis/internal/consumer/budget"
	"github.com/connect-kinesis/connect-kinesis/internal/consumer/reader"
	"github.com/connect-kinesis/connect-kinesis/internal/kinesisx"
	"github.com/redpanda-data/benthos/v4/public/service"
)

// Consumer reads every configured stream.
type Consumer struct {
	cfg     consumer.Config
	api     consumer.KinesisAPI
	stores  func(streamID string) consumer.Store
	log     *service.Logger
	metrics *consumer.Metrics
	owner   string
	out     chan *consumer.Batch
	// budget bounds what every reader holds together; nil without a bound.
	budget *budget.Budget
	// processed is when the pipeline last processed a record of any
	// stream: what tells a record failing on its own from an outage.
	processed reader.Processed
	// tally is what each stream's last balancing round saw, so that
	// rounds balance across streams (tally.go).
	tally tally
	// shared checks every read stream's group record, and heartbeats
	// this member in every stream, once for all streams (groupwatch.go).
	shared sharedRounds
	// describes paces the DescribeStreamSummary calls of the stream adds
	// and re-creation checks: the process's (describePermits), shared by
	// every input of the process as they share the account's limit.
	describes *kinesisx.Pace

	mu      sync.Mutex
	coords  []*coordinator
	cancel  context.CancelFunc
	wg      sync.WaitGroup
	started bool
	// runCtx is what coordinators run under, set by Start; closed is set
	// by Close, after which no stream is added (follow.go).
	runCtx context.Context
	closed bool
	// followed are the streams added by Follow, by key (follow.go);
	// followMu serialises Follow, AddStream and RemoveStream.
	followed map[string]*followed
	followMu sync.Mutex
	// removing are the followed streams being removed (follow.go), so
	// that Close waits for them, and bounds them by its own deadline,
	// before it cancels what every coordinator runs under.
	removing map[*coordinator]*removal
}

// New builds a consumer. stores returns the Store of a stream given its
// identity (the ARN, or the name when the service gives no ARN).
func New(cfg consumer.Config, api consumer.KinesisAPI, stores func(streamID string) consumer.Store, log *service.Logger, m *service.Metrics) (*Consumer, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	c := &Consumer{
		cfg:     cfg,
		api:     api,
		stores:  stores,
		log:     log,
		metrics: consumer.NewMetrics(m),
		owner:   cmp.Or(cfg.InstanceID, consumer.InstanceID()),
		out:     make(chan *consumer.Batch),

		describes: describePermits,
	}
	if cfg.MaxBufferedBytes > 0 {
		c.budget = budget.New(cfg.MaxBufferedBytes, c.metrics)
	}
	return c, nil
}

// Owner is this consumer's member id.
func (c *Consumer) Owner() string { return c.owner }

// Batches delivers batches in per-shard order, without the lease check of
// Next; tests that need no such check read it directly.
func (c *Consumer) Batches() <-chan *consumer.Batch { return c.out }

// Next returns the next batch, in per-shard order, until ctx ends. A batch
// whose lease passed its local deadline while it waited for this call (the
// process was paused) is not returned: it goes back to its reader, which
// hands it over again once a renewal confirms the lease, or drops it when
// the lease is lost. Nor is a batch whose lease was lost before its
// deadline (an operator's reset, a recreated stream, a re-seed finding the
// shard taken): a reader's send and its ending can both be ready at once.
// With shard_max_in_flight above 1, nor is a batch behind an earlier
// refused one of its shard, until that one is admitted: per-shard order.
func (c *Consumer) Next(ctx context.Context) (*consumer.Batch, error) {
	for {
		select {
		case b := <-c.out:
			// Read before Admit: a refused batch is its reader's again
			// at once.
			stream, shard, n := b.Stream, b.Shard, len(b.Records)
			if b.Admit() {
				return b, nil
			}
			c.log.Debugf("A batch of %d records of shard %s of stream %s was refused at admission: its lease is lost or past its local deadline, or an earlier batch of the shard was refused and is not handed over again yet; its reader hands it over again (after a renewal, and after the earlier batch), or drops it when the lease is lost", n, shard, stream)
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
		co, err := newCoordinator(ctx, c, name, false)
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
	c.coords, c.cancel, c.started, c.runCtx = coords, cancel, true, runCtx
	c.metrics.Streams.Set(int64(len(coords)))
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
			c.budget.Watch(runCtx, c.log, c.budgetWarnAfter(coords), budget.EpisodeGap, budget.CheckInterval)
		}()
	}
	return nil
}

// budgetWarnAfter is how long shards may wait for the budget before a
// warning: lag_warn_threshold, or when it is 0 the least of the streams'
// own thresholds (half the retention).
func (c *Consumer) budgetWarnAfter(coords []*coordinator) time.Duration {
	if c.cfg.LagWarnThreshold > 0 {
		return c.cfg.LagWarnThreshold
	}
	var least time.Duration
	for _, co := range coords {
		if lagWarn, _ := co.lag(); lagWarn > 0 && (least == 0 || lagWarn < least) {
			least = lagWarn
		}
	}
	if least == 0 && c.cfg.FollowStreams {
		// No named stream to take it from: half the default retention.
		least = 12 * time.Hour
	}
	return least
}
