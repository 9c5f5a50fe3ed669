package output

import (
	"context"
	"fmt"
	"sync"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/kinesis"
	"github.com/aws/aws-sdk-go-v2/service/kinesis/types"
	"github.com/redpanda-data/benthos/v4/public/service"

	"github.com/connect-kinesis/connect-kinesis/internal/kinesisx"
	"github.com/connect-kinesis/connect-kinesis/internal/producer"
)

// newOutput builds the output from its config, with the batching policy and
// the batches in flight Benthos is to use.
func newOutput(conf *service.ParsedConfig, mgr *service.Resources) (*kinesisOutput, service.BatchPolicy, int, error) {
	oc, err := outputConfigFromParsed(conf)
	if err != nil {
		return nil, service.BatchPolicy{}, 0, err
	}
	out, err := newOutputFromConfig(oc, mgr)
	if err != nil {
		return nil, service.BatchPolicy{}, 0, err
	}
	policy := oc.Batching
	if oc.numbered() {
		order, pacer := newBatchOrder(mgr.Logger()), newBatchPacer()
		order.pacer = pacer
		numbered, err := order.policy(oc.batchingRaw)
		if err != nil {
			// The policy is rebuilt in the global environment, which does
			// not know a batching processor registered in the caller's
			// own: order then holds with one batch at a time.
			order.close()
			pacer.close()
			mgr.Logger().With("stream", oc.Stream).Warnf("Writing ordered batches one at a time: the %s policy cannot take the output's numbering: %v", fieldBatching, err)
			out.conf.OrderedBatches = 1
		} else {
			out.order, out.pacer, policy = order, pacer, numbered
		}
	}
	return out, policy, out.conf.batchesInFlight(), nil
}

// kinesisAPI is the part of the Kinesis client the output uses.
type kinesisAPI interface {
	producer.API
	DescribeStreamSummary(ctx context.Context, in *kinesis.DescribeStreamSummaryInput, optFns ...func(*kinesis.Options)) (*kinesis.DescribeStreamSummaryOutput, error)
}

type kinesisOutput struct {
	conf    outputConfig
	log     *service.Logger
	metrics *service.Metrics

	// newClient builds the client at connect; tests replace it with a fake.
	newClient func(ctx context.Context) (kinesisAPI, string, error)

	mFailed *service.MetricCounter

	// order numbers the batches the output's batching forms, to write them
	// in that order; nil when batches are not numbered (see numbered).
	order *batchOrder
	// pacer holds back batches that could only wait (pacing.go); nil
	// when batches are not numbered.
	pacer *batchPacer
	// keyBound logs, once, that writes are bound by repeated keys;
	// nullKeys, that keys came out as "null".
	keyBound, nullKeys sync.Once
	mNullKeys          *service.MetricCounter

	mu       sync.RWMutex
	producer *producer.Producer
	// stopRefresh ends the shard map refresh of the current connection.
	stopRefresh func()
}

func newOutputFromConfig(conf outputConfig, mgr *service.Resources) (*kinesisOutput, error) {
	o := &kinesisOutput{
		conf:    conf,
		log:     mgr.Logger(),
		metrics: mgr.Metrics(),
		mFailed: mgr.Metrics().NewCounter(producer.MetricFailed, "stream", "reason"),

		mNullKeys: mgr.Metrics().NewCounter(MetricNullPartitionKeys, "stream"),
	}
	o.newClient = func(ctx context.Context) (kinesisAPI, string, error) {
		cfg, err := conf.AWS.LoadLogged(ctx, o.log)
		if err != nil {
			return nil, "", err
		}
		return conf.AWS.KinesisClient(cfg), cfg.Region, nil
	}
	return o, nil
}

func (o *kinesisOutput) Connect(ctx context.Context) error {
	api, region, err := o.newClient(ctx)
	if err != nil {
		return fmt.Errorf("connecting to stream %s: %w", o.conf.Stream, err)
	}
	pc := producer.Config{
		MaxRecordSize: o.conf.MaxRecordSize,
		MaxInFlight:   o.conf.MaxInFlight,
		Ordered:       o.conf.PreserveOrder,
		// Benthos then runs one WriteBatch at a time.
		SingleWriter: o.conf.PreserveOrder && o.conf.batchesInFlight() == 1,
		Backoff:      o.conf.Backoff,
		Aggregation:  o.conf.Aggregation,
		KeyBound:     o.logKeyBound,
	}
	// Name the stream the way the user did: kinesalite rejects StreamARN,
	// and a name is all AWS needs within the client's account and region.
	in := &kinesis.DescribeStreamSummaryInput{}
	in.StreamName, in.StreamARN = kinesisx.StreamRef(o.conf.Stream)
	pc.StreamName, pc.StreamARN = aws.ToString(in.StreamName), aws.ToString(in.StreamARN)
	out, err := api.DescribeStreamSummary(ctx, in)
	if err != nil {
		return describeError(o.conf.Stream, region, err)
	}
	if d := out.StreamDescriptionSummary; d != nil && d.StreamStatus != types.StreamStatusActive && d.StreamStatus != types.StreamStatusUpdating {
		return fmt.Errorf("stream %s in region %s is %s, not writable yet", o.conf.Stream, region, d.StreamStatus)
	}

	p := producer.New(api, pc, o.log, o.metrics)
	stop := func() {}
	if o.conf.Aggregation.Enabled || o.conf.PreserveOrder {
		// Both group records by shard: aggregation to pack them, ordering
		// to send each shard's records in rounds.
		if err := p.RefreshShardMap(ctx); err != nil {
			return fmt.Errorf("reading the shard map of stream %s in region %s (needed by %s and %s.%s; check the kinesis:ListShards permission): %w",
				o.conf.Stream, region, fieldPreserveOrder, fieldAggregation, fieldAggEnabled, err)
		}
		stop = o.refreshShardMap(ctx, p)
	}
	o.mu.Lock()
	o.stopLocked()
	o.producer, o.stopRefresh = p, stop
	o.mu.Unlock()
	o.log.With("stream", o.conf.Stream, "region", region).Debug("Connected to Kinesis stream")
	return nil
}

func (o *kinesisOutput) WriteBatch(ctx context.Context, batch service.MessageBatch) error {
	paced := o.pacer.of(batch)
	if paced != nil {
		defer paced.done()
	}
	o.mu.RLock()
	p := o.producer
	o.mu.RUnlock()
	if p == nil {
		// Closed: nothing is written any more, and no batch waits for
		// this one.
		if o.order != nil {
			if first, last, ok := o.order.numbers(batch); ok {
				o.order.tookPlace(first, last)
			}
		}
		return service.ErrNotConnected
	}
	// The batch's place in the order is taken before anything else, so
	// that batches are ordered as they were formed (numbered) or reached
	// the output, not as their interpolation finished.
	place, err := o.reserve(ctx, p, batch)
	if err != nil {
		return err
	}
	if paced != nil {
		place = place.Watch(paced.watch)
	}

	var (
		failures []failure
		entries  = make([]producer.Entry, 0, len(batch))
		index    = make([]int, 0, len(batch)) // entry -> message index
	)
	// Executors convert the batch once, not once per message.
	keys := keyOf{meta: o.conf.partitionKeyMeta, exec: batch.InterpolationExecutor(o.conf.PartitionKey)}
	var hashKeys *service.MessageBatchInterpolationExecutor
	if o.conf.HashKey != nil {
		hashKeys = batch.InterpolationExecutor(o.conf.HashKey)
	}
	nulls := 0
	for i, msg := range batch {
		e, err := entry(keys, hashKeys, i, msg)
		if err != nil {
			failures = append(failures, failure{i, err})
			continue
		}
		if e.PartitionKey == "null" {
			nulls++
		}
		entries = append(entries, e)
		index = append(index, i)
	}
	if nulls > 0 {
		o.noteNullKeys(nulls, len(batch))
	}
	if len(failures) > 0 {
		o.mFailed.Incr(int64(len(failures)), kinesisx.StreamName(o.conf.Stream), producer.FailInvalid)
	}

	for n, err := range place.Write(ctx, entries) {
		if err != nil {
			failures = append(failures, failure{index[n], err})
		}
	}
	if len(failures) == 0 {
		return nil
	}
	// Only the failed messages are marked, so a fallback output or
	// auto_replay_nacks handles exactly those and nothing is written twice.
	bErr := service.NewBatchError(batch, fmt.Errorf("writing to stream %s: %d of %d messages failed, e.g. message %d: %w%s",
		o.conf.Stream, len(failures), len(batch), failures[0].index, failures[0].err, neverWritable(failures)))
	for _, f := range failures {
		bErr.Failed(f.index, &messageError{err: f.err, batch: bErr})
	}
	return bErr
}

// reserve takes batch's place among the ordered writes of p: for a numbered
// batch, once every batch numbered before it has taken its own.
func (o *kinesisOutput) reserve(ctx context.Context, p *producer.Producer, batch service.MessageBatch) (producer.Reservation, error) {
	if o.order == nil {
		return p.Reserve(), nil
	}
	first, last, ok := o.order.numbers(batch)
	if !ok {
		return p.Reserve(), nil
	}
	// Whatever happens, later batches need not wait for this one any
	// more: it takes its place now, or is failed and comes back, if at
	// all, in a new batch with a new number.
	defer o.order.tookPlace(first, last)
	if err := o.order.await(ctx, first); err != nil {
		return producer.Reservation{}, err
	}
	return p.Reserve(), nil
}

func (o *kinesisOutput) Close(context.Context) error {
	o.mu.Lock()
	defer o.mu.Unlock()
	if o.order != nil {
		o.order.close()
	}
	if o.pacer != nil {
		o.pacer.close()
	}
	o.stopLocked()
	o.producer = nil
	return nil
}
