package output

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/kinesis"
	"github.com/aws/aws-sdk-go-v2/service/kinesis/types"
	"github.com/redpanda-data/benthos/v4/public/service"

	"github.com/connect-kinesis/connect-kinesis/internal/awsconf"
	"github.com/connect-kinesis/connect-kinesis/internal/kinesisx"
	"github.com/connect-kinesis/connect-kinesis/internal/producer"
)

// Field names.
const (
	fieldStream        = "stream"
	fieldPartitionKey  = "partition_key"
	fieldHashKey       = "hash_key"
	fieldMaxInFlight   = "max_in_flight"
	fieldBatching      = "batching"
	fieldMaxRecordSize = "max_record_size"
	fieldAggregation   = "aggregation"
	fieldAggEnabled    = "enabled"
	fieldAggMaxBytes   = "max_bytes"
	fieldAggMaxRecords = "max_records"
)

// Defaults of the aggregation fields, those of the KPL where it has one.
const (
	defaultAggMaxBytes   = 50 << 10
	defaultAggMaxRecords = 1000
	// minAggMaxBytes leaves room for the aggregate's magic, digest and at
	// least one small record.
	minAggMaxBytes = 256
)

func spec() *service.ConfigSpec {
	return service.NewConfigSpec().
		Stable().
		Categories("Services", "AWS").
		Summary("Writes messages to an Amazon Kinesis data stream.").
		Description(`
Each batch is packed into PutRecords requests of at most 500 records and 5 MiB (data plus partition keys), sent concurrently up to `+"`max_in_flight`"+` requests at a time. Records keep the order of the batch within a request.

When Kinesis refuses some records of a request (throttling, `+"`InternalFailure`"+`, KMS errors), only those records are sent again, with exponential backoff and jitter, until `+"`max_retries`"+` or `+"`backoff.max_elapsed_time`"+` is reached. Records Kinesis accepted are never sent again by this output. The messages that still fail are reported one by one with Kinesis' error code, so a `+"`fallback`"+` output or `+"`auto_replay_nacks`"+` handles exactly those.

A message that can never be written fails alone, before anything is sent, and the rest of the batch is written: an empty partition key or one longer than 256 characters, a hash key that is not a decimal integer in [0, 2^128), an interpolation error, or a record (data plus partition key) larger than `+"`max_record_size`"+`.

### Aggregation

With `+"`aggregation.enabled`"+`, small messages bound for the same shard (the MD5 of their partition key, or their hash key, against the stream's shard map read at connect) are packed into KPL aggregated records, readable by the KCL, Flink and the `+"`kinesis`"+` input. This multiplies the records per second a shard accepts. If an aggregated record fails for good, every message in it fails.`).
		Fields(
			service.NewStringField(fieldStream).
				Description("The stream to write to, by name or ARN.").
				Examples("my-stream", "arn:aws:kinesis:us-east-1:123456789012:stream/my-stream"),
			service.NewInterpolatedStringField(fieldPartitionKey).
				Description("The partition key of each message, 1 to 256 characters. Messages with the same key go to the same shard, in order.").
				Examples(`${! json("user_id") }`, `${! uuid_v4() }`),
			service.NewInterpolatedStringField(fieldHashKey).
				Description("An explicit hash key, a decimal integer in [0, 2^128), that picks the shard instead of the partition key's hash.").
				Optional().Advanced(),
			service.NewOutputMaxInFlightField().
				Description("The most batches written at once, and the most PutRecords requests in flight."),
			service.NewBatchPolicyField(fieldBatching),
			service.NewIntField(fieldMaxRecordSize).
				Description(fmt.Sprintf("The largest record in bytes, counting data and partition key. Kinesis allows %d by default; a stream raised with UpdateMaxRecordSize accepts up to %d. Larger messages fail alone.", kinesisx.DefaultMaxRecordSize, kinesisx.MaxRecordSizeLimit)).
				Default(kinesisx.DefaultMaxRecordSize).Advanced(),
			service.NewObjectField(fieldAggregation,
				service.NewBoolField(fieldAggEnabled).
					Description("Pack small messages bound for the same shard into KPL aggregated records.").
					Default(false),
				service.NewIntField(fieldAggMaxBytes).
					Description("The largest aggregated record in bytes. Messages larger than this are sent as plain records.").
					Default(defaultAggMaxBytes),
				service.NewIntField(fieldAggMaxRecords).
					Description("The most messages in one aggregated record.").
					Default(defaultAggMaxRecords),
			).Description("KPL aggregation of small records.").Advanced(),
		).
		Fields(kinesisx.RetryFields(kinesisx.DefaultBackoff)...).
		Fields(awsconf.Fields()...).
		LintRule(lintRule()).
		Example("Write JSON events keyed by user", "Events of one user land on one shard, in order.", `
output:
  kinesis:
    stream: events
    region: us-east-1
    partition_key: ${! json("user_id") }
    batching:
      count: 500
      period: 100ms
`)
}

func init() {
	err := service.RegisterBatchOutput("kinesis", spec(),
		func(conf *service.ParsedConfig, mgr *service.Resources) (service.BatchOutput, service.BatchPolicy, int, error) {
			oc, err := outputConfigFromParsed(conf)
			if err != nil {
				return nil, service.BatchPolicy{}, 0, err
			}
			out, err := newOutputFromConfig(oc, mgr)
			if err != nil {
				return nil, service.BatchPolicy{}, 0, err
			}
			return out, oc.Batching, oc.MaxInFlight, nil
		})
	if err != nil {
		panic(err)
	}
}

// outputConfig is the parsed, validated configuration.
type outputConfig struct {
	Stream        string
	PartitionKey  *service.InterpolatedString
	HashKey       *service.InterpolatedString // nil when unset
	MaxInFlight   int
	Batching      service.BatchPolicy
	MaxRecordSize int
	Aggregation   producer.Aggregation
	Backoff       kinesisx.Backoff
	AWS           awsconf.Settings
}

func outputConfigFromParsed(conf *service.ParsedConfig) (c outputConfig, err error) {
	if c.Stream, err = conf.FieldString(fieldStream); err != nil {
		return c, err
	}
	if strings.TrimSpace(c.Stream) == "" {
		return c, fmt.Errorf("field %s: it is empty; give the stream's name or ARN", fieldStream)
	}
	if c.PartitionKey, err = conf.FieldInterpolatedString(fieldPartitionKey); err != nil {
		return c, err
	}
	if conf.Contains(fieldHashKey) {
		if c.HashKey, err = conf.FieldInterpolatedString(fieldHashKey); err != nil {
			return c, err
		}
	}
	if c.MaxInFlight, err = conf.FieldMaxInFlight(); err != nil {
		return c, err
	}
	if c.MaxInFlight < 1 {
		return c, fmt.Errorf("field %s: %d must be at least 1", fieldMaxInFlight, c.MaxInFlight)
	}
	if c.Batching, err = conf.FieldBatchPolicy(fieldBatching); err != nil {
		return c, err
	}
	if c.MaxRecordSize, err = conf.FieldInt(fieldMaxRecordSize); err != nil {
		return c, err
	}
	if c.MaxRecordSize < 1 || c.MaxRecordSize > kinesisx.MaxRecordSizeLimit {
		return c, fmt.Errorf("field %s: %d is out of range; accepted values are 1 to %d bytes (default %d)", fieldMaxRecordSize, c.MaxRecordSize, kinesisx.MaxRecordSizeLimit, kinesisx.DefaultMaxRecordSize)
	}
	agg := conf.Namespace(fieldAggregation)
	if c.Aggregation.Enabled, err = agg.FieldBool(fieldAggEnabled); err != nil {
		return c, err
	}
	if c.Aggregation.MaxBytes, err = agg.FieldInt(fieldAggMaxBytes); err != nil {
		return c, err
	}
	if c.Aggregation.MaxRecords, err = agg.FieldInt(fieldAggMaxRecords); err != nil {
		return c, err
	}
	if c.Aggregation.Enabled && (c.Aggregation.MaxBytes < minAggMaxBytes || c.Aggregation.MaxBytes > c.MaxRecordSize) {
		return c, fmt.Errorf("field %s.%s: %d is out of range; accepted values are %d to %s (%d)", fieldAggregation, fieldAggMaxBytes, c.Aggregation.MaxBytes, minAggMaxBytes, fieldMaxRecordSize, c.MaxRecordSize)
	}
	if c.Aggregation.MaxRecords < 1 {
		return c, fmt.Errorf("field %s.%s: %d must be at least 1", fieldAggregation, fieldAggMaxRecords, c.Aggregation.MaxRecords)
	}
	if c.Backoff, err = kinesisx.BackoffFromParsed(conf); err != nil {
		return c, err
	}
	if c.AWS, err = awsconf.SettingsFromParsed(conf); err != nil {
		return c, err
	}
	return c, nil
}

// kinesisAPI is the part of the Kinesis client the output uses.
type kinesisAPI interface {
	producer.API
	kinesisx.ListShardsAPI
	DescribeStreamSummary(ctx context.Context, in *kinesis.DescribeStreamSummaryInput, optFns ...func(*kinesis.Options)) (*kinesis.DescribeStreamSummaryOutput, error)
}

type kinesisOutput struct {
	conf    outputConfig
	log     *service.Logger
	metrics *service.Metrics

	// newClient builds the client at connect; tests replace it with a fake.
	newClient func(ctx context.Context) (kinesisAPI, string, error)

	mFailed *service.MetricCounter

	mu       sync.RWMutex
	producer *producer.Producer
	// stopRefresh ends the shard map refresh of the current connection.
	stopRefresh func()
}

// shardMapRefresh is how often aggregation re-reads the shard map, so that
// after a reshard records are grouped by the new shards. Until then an
// aggregate still lands on one shard (its explicit hash key), only its
// members may belong to a sibling.
const shardMapRefresh = time.Minute

func newOutputFromConfig(conf outputConfig, mgr *service.Resources) (*kinesisOutput, error) {
	o := &kinesisOutput{
		conf:    conf,
		log:     mgr.Logger(),
		metrics: mgr.Metrics(),
		mFailed: mgr.Metrics().NewCounter(producer.MetricFailed, "stream"),
	}
	o.newClient = func(ctx context.Context) (kinesisAPI, string, error) {
		cfg, err := conf.AWS.Load(ctx)
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
		Backoff:       o.conf.Backoff,
		Aggregation:   o.conf.Aggregation,
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
	if o.conf.Aggregation.Enabled {
		m, err := producer.LoadShardMap(ctx, api, o.conf.Stream)
		if err != nil {
			return fmt.Errorf("reading the shard map of stream %s in region %s for aggregation: %w", o.conf.Stream, region, err)
		}
		p.SetShardMap(m)
		stop = o.refreshShardMap(ctx, api, p, pc)
	}
	o.mu.Lock()
	o.stopLocked()
	o.producer, o.stopRefresh = p, stop
	o.mu.Unlock()
	o.log.With("stream", o.conf.Stream, "region", region).Debug("Connected to Kinesis stream")
	return nil
}

// describeError turns a failed DescribeStreamSummary into one error that says
// what is wrong with which stream where.
func describeError(stream, region string, err error) error {
	switch code := kinesisx.ErrorCode(err); {
	case code == kinesisx.CodeResourceNotFound:
		return fmt.Errorf("stream %s does not exist in region %s (check `stream`, `region` and `endpoint`): %w", stream, region, err)
	case kinesisx.IsAccessDenied(err):
		return fmt.Errorf("access to stream %s in region %s is denied (check `credentials` and the role's kinesis:PutRecords and kinesis:DescribeStreamSummary permissions): %w", stream, region, err)
	default:
		return fmt.Errorf("describing stream %s in region %s: %w", stream, region, err)
	}
}

func (o *kinesisOutput) WriteBatch(ctx context.Context, batch service.MessageBatch) error {
	o.mu.RLock()
	p := o.producer
	o.mu.RUnlock()
	if p == nil {
		return service.ErrNotConnected
	}

	type failure struct {
		index int
		err   error
	}
	var (
		failures []failure
		entries  = make([]producer.Entry, 0, len(batch))
		index    = make([]int, 0, len(batch)) // entry -> message index
	)
	// Executors convert the batch once, not once per message.
	keys := batch.InterpolationExecutor(o.conf.PartitionKey)
	var hashKeys *service.MessageBatchInterpolationExecutor
	if o.conf.HashKey != nil {
		hashKeys = batch.InterpolationExecutor(o.conf.HashKey)
	}
	for i, msg := range batch {
		e, err := entry(keys, hashKeys, i, msg)
		if err != nil {
			failures = append(failures, failure{i, err})
			continue
		}
		entries = append(entries, e)
		index = append(index, i)
	}
	if len(failures) > 0 {
		o.mFailed.Incr(int64(len(failures)), kinesisx.StreamName(o.conf.Stream))
	}

	for n, err := range p.Write(ctx, entries) {
		if err != nil {
			failures = append(failures, failure{index[n], err})
		}
	}
	if len(failures) == 0 {
		return nil
	}
	// Only the failed messages are marked, so a fallback output or
	// auto_replay_nacks handles exactly those and nothing is written twice.
	bErr := service.NewBatchError(batch, fmt.Errorf("writing to stream %s: %d of %d messages failed, e.g. message %d: %w",
		o.conf.Stream, len(failures), len(batch), failures[0].index, failures[0].err))
	for _, f := range failures {
		bErr.Failed(f.index, f.err)
	}
	return bErr
}

func entry(keys, hashKeys *service.MessageBatchInterpolationExecutor, i int, msg *service.Message) (producer.Entry, error) {
	var (
		e   producer.Entry
		err error
	)
	if e.PartitionKey, err = keys.TryString(i); err != nil {
		return e, fmt.Errorf("interpolating %s: %w", fieldPartitionKey, err)
	}
	if hashKeys != nil {
		if e.ExplicitHashKey, err = hashKeys.TryString(i); err != nil {
			return e, fmt.Errorf("interpolating %s: %w", fieldHashKey, err)
		}
	}
	if e.Data, err = msg.AsBytes(); err != nil {
		return e, fmt.Errorf("reading message body: %w", err)
	}
	return e, nil
}

// refreshShardMap re-reads the shard map every shardMapRefresh until the
// returned func is called; that func waits for the refresher to end.
func (o *kinesisOutput) refreshShardMap(ctx context.Context, api kinesisAPI, p *producer.Producer, pc producer.Config) func() {
	// The refresher lives as long as the connection, not the Connect call.
	ctx, cancel := context.WithCancel(context.WithoutCancel(ctx))
	done := make(chan struct{})
	go func() {
		defer close(done)
		t := time.NewTicker(shardMapRefresh)
		defer t.Stop()
		for {
			select {
			case <-ctx.Done():
				return
			case <-t.C:
			}
			m, err := producer.LoadShardMap(ctx, api, o.conf.Stream)
			if err != nil {
				if ctx.Err() == nil {
					o.log.With("stream", o.conf.Stream).Warnf("Refreshing the shard map for aggregation, keeping the previous one: %v", err)
				}
				continue
			}
			p.SetShardMap(m)
		}
	}()
	return func() {
		cancel()
		<-done
	}
}

// stopLocked ends the current connection's background work; o.mu is held.
func (o *kinesisOutput) stopLocked() {
	if o.stopRefresh != nil {
		o.stopRefresh()
		o.stopRefresh = nil
	}
}

func (o *kinesisOutput) Close(context.Context) error {
	o.mu.Lock()
	defer o.mu.Unlock()
	o.stopLocked()
	o.producer = nil
	return nil
}
