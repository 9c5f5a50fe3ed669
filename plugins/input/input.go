package input

import (
	"context"
	"errors"
	"fmt"
	"sync"

	"github.com/redpanda-data/benthos/v4/public/service"

	"github.com/connect-kinesis/connect-kinesis/internal/awsconf"
	"github.com/connect-kinesis/connect-kinesis/internal/consumer"
	"github.com/connect-kinesis/connect-kinesis/internal/consumer/coordinator"
	"github.com/connect-kinesis/connect-kinesis/internal/kinesisx"
	"github.com/connect-kinesis/connect-kinesis/internal/lintrule"
	"github.com/connect-kinesis/connect-kinesis/internal/streams"
	"github.com/connect-kinesis/connect-kinesis/plugins/checkpointer"
)

// Field names.
const (
	fieldStreams           = "streams"
	fieldStartPosition     = "start_position"
	fieldStartTimestamp    = "start_timestamp"
	fieldShardMaxInFlight  = "shard_max_in_flight"
	fieldShardParallelism  = "shard_parallelism"
	fieldLimit             = "limit"
	fieldPollInterval      = "poll_interval"
	fieldIdlePollInterval  = "idle_poll_interval"
	fieldDiscoveryInterval = "shard_discovery_interval"
	fieldDeaggregate       = "deaggregate"
	fieldLagWarnThreshold  = "lag_warn_threshold"
	fieldMaxBufferedBytes  = "max_buffered_bytes"
	fieldEnhancedFanOut    = "enhanced_fan_out"
	fieldEFOEnabled        = "enabled"
	fieldEFOConsumerName   = "consumer_name"
	fieldEFOConsumerARN    = "consumer_arn"
	fieldAutoReplayNacks   = "auto_replay_nacks"
)

// EnvEmulatorNoInitialResponse is for tests against kinesis-mock: see
// consumer.EnvEmulatorNoInitialResponse.
const EnvEmulatorNoInitialResponse = consumer.EnvEmulatorNoInitialResponse

// Metadata keys set on every message.
const (
	MetaStream         = "kinesis_stream"
	MetaShard          = "kinesis_shard"
	MetaPartitionKey   = "kinesis_partition_key"
	MetaSequenceNumber = "kinesis_sequence_number"
	MetaSubSequence    = "kinesis_sub_sequence_number"
	MetaArrival        = "kinesis_arrival_timestamp"
	MetaMillisBehind   = "kinesis_millis_behind_latest"
)

// Spec is the configuration spec of the `kinesis` input.
func Spec() *service.ConfigSpec {
	fields := []*service.ConfigField{
		service.NewStringListField(fieldStreams).
			Description(streams.StreamsDescription).
			LintRule(lintStreams).
			Example([]string{"orders"}).
			Example([]string{"arn:aws:kinesis:us-east-1:123456789012:stream/orders"}).
			Example([]string{"orders", "tenant-*"}),
		service.NewStringEnumField(fieldStartPosition, consumer.StartTrimHorizon, consumer.StartLatest, consumer.StartAtTimestamp).
			Description(fmt.Sprintf("`trim_horizon` (the default): a shard without a checkpoint starts at its oldest record. `latest`: at the group's first start, less %v; `at_timestamp`: at `start_timestamp`. A checkpoint always wins. See [tuning](../../tuning.md#start_position-input).", consumer.LatestSkewMargin)).
			LintRule(lintrule.Enum(fieldStartPosition, "the oldest retained record is "+consumer.StartTrimHorizon+", the newest "+consumer.StartLatest, consumer.StartTrimHorizon, consumer.StartLatest, consumer.StartAtTimestamp)).
			Default(consumer.StartTrimHorizon),
		service.NewStringField(fieldStartTimestamp).
			Description("The RFC3339 time to start from with `start_position: at_timestamp`; required with it and only used with it.").
			LintRule(lintStartTimestamp).
			Example("2024-05-01T12:00:00Z").
			Default(""),
	}
	fields = append(fields, streams.Fields()...)
	fields = append(fields, checkpointer.Fields()...)
	fields = append(fields,
		service.NewIntField(fieldShardMaxInFlight).
			Description("1 (the default): a shard's next batch waits for the previous one's acknowledgement, so each partition key stays in order. More gives up that order; use `shard_parallelism` instead. See [tuning](../../tuning.md#shard_max_in_flight-input).").
			Default(1).Advanced(),
		service.NewIntField(fieldShardParallelism).
			Description(fmt.Sprintf("1 (the default): a shard is one lane. Up to %d lanes by partition key, each key in order, for a pipeline slower than a shard. Needs `shard_max_in_flight: 1`. See [tuning](../../tuning.md#shard_parallelism-input).", consumer.MaxShardParallelism)).
			Default(1).Advanced(),
		service.NewIntField(fieldLimit).
			Description(fmt.Sprintf("The most records one GetRecords call returns (1..%d), and the most messages in one batch.", kinesisx.MaxGetRecordsLimit)).
			Default(kinesisx.MaxGetRecordsLimit).Advanced(),
		service.NewDurationField(fieldPollInterval).
			Description(fmt.Sprintf("The shortest time between two GetRecords calls of one shard. At least %v, so a shard is never read more than %d times per second (its Kinesis limit, shared by every consumer of the stream).", kinesisx.MinPollInterval, kinesisx.MaxGetRecordsPerSecond)).
			LintRule(lintrule.Duration(fieldPollInterval, "200ms")).
			Default("200ms").Advanced(),
		service.NewDurationField(fieldIdlePollInterval).
			Description("The time to wait after a GetRecords call returned nothing and the shard is caught up.").
			LintRule(lintrule.Duration(fieldIdlePollInterval, "1s")).
			Default("1s").Advanced(),
		service.NewDurationField(fieldDiscoveryInterval).
			Description("How often shards are listed to find new ones after a reshard. A shard that ends triggers a listing at once.").
			LintRule(lintrule.Duration(fieldDiscoveryInterval, "10s")).
			Default("10s").Advanced(),
		service.NewBoolField(fieldDeaggregate).
			Description("`true` (the default): KPL aggregated records are split into user records, dropping stray copies as KCL does. `false`: an aggregate is one message. See [tuning](../../tuning.md#deaggregate-input).").
			Default(true).Advanced(),
		service.NewDurationField(fieldLagWarnThreshold).
			Description("Log a warning when a shard is further behind than this. `0s` uses half the stream's retention period. An error is logged past 90% of the retention period, when records are about to expire unread.").
			LintRule(lintrule.Duration(fieldLagWarnThreshold, "12h")).
			Default("0s").Advanced(),
		maxBufferedBytesField(),
		redeliveryField(),
	)
	fields = append(fields, enhancedFanOutField())
	fields = append(fields, awsconf.Fields()...)
	fields = append(fields, service.NewBoolField(fieldAutoReplayNacks).
		Description("Accepted for compatibility: either value replays a nacked batch before anything later of its shard. See [tuning](../../tuning.md#auto_replay_nacks-input).").
		Default(true))
	return service.NewConfigSpec().
		Stable().
		Categories("Services").
		Summary("Reads Kinesis Data Streams with Redis checkpoints, in per-shard order, across resharding and across instances.").
		Description(`
Each batch is one GetRecords response of one shard. A shard's checkpoint moves only to the highest record acknowledged together with every record before it, so nothing is skipped; after a crash at most the records since the last commit (`+"`checkpoint.commit_period`"+`) are delivered again. A child shard is read only once its parents are read to their end and committed, so a partition key stays in order across reshards. Instances with the same `+"`checkpoint.group`"+` share the shards and take over a dead instance's after about `+"`lease.period + lease.rebalance_period`"+`.

New here? Start with [getting started](../../getting-started.md). Then: [running in production](../../deploy.md), [the checkpointer](../../checkpointer.md), [poison records](../../poison-records.md), [tuning](../../tuning.md), [enhanced fan-out](../../enhanced-fan-out.md) and [migrating](../../migrating.md).

### Metadata

`+"`kinesis_stream`, `kinesis_shard`, `kinesis_partition_key`, `kinesis_sequence_number`, `kinesis_sub_sequence_number` (aggregated records only), `kinesis_arrival_timestamp` (RFC3339Nano), `kinesis_millis_behind_latest`, `kinesis_delivery_attempt` (`1` on a record's first delivery by this instance) and `kinesis_redelivered` (`true` whenever the group may have handed the record over before; absent otherwise): a downstream that must not apply a record twice checks only those, see [the redelivery mark](../../poison-records.md#the-redelivery-mark).").
		Fields(fields...).
		LintRule(lintRule()).
		Example("Read a stream", "Reads `orders` from the oldest record and resumes from Redis checkpoints.", `
input:
  kinesis:
    streams: [ orders ]
    checkpoint:
      redis:
        url: redis://localhost:6379
      group: orders-to-s3
`)
}

func init() {
	err := service.RegisterBatchInput("kinesis", Spec(), func(conf *service.ParsedConfig, mgr *service.Resources) (service.BatchInput, error) {
		// Not wrapped in service.AutoRetryNacksBatched: the consumer
		// redelivers nacked batches itself (see auto_replay_nacks).
		return newFromParsed(conf, mgr)
	})
	if err != nil {
		panic(err)
	}
}

type kinesisInput struct {
	conf    Config
	log     *service.Logger
	metrics *service.Metrics

	mu   sync.Mutex
	sess *session // nil until Connect, and again after Close
	// refused is why the input ended for good: another process runs under
	// its instance id (instance.go); nil otherwise.
	refused error
	// permanentFailures counts Connects in a row that failed for good.
	permanentFailures int
}

func newFromParsed(conf *service.ParsedConfig, mgr *service.Resources) (*kinesisInput, error) {
	c, err := ConfigFromParsed(conf)
	if err != nil {
		return nil, err
	}
	if c.budgetNote != "" {
		mgr.Logger().Info(c.budgetNote)
	}
	if c.deadLetter != nil {
		c.deadLetter.mgr = mgr
	}
	return newFromConfig(c, mgr.Logger(), mgr.Metrics()), nil
}

func newFromConfig(c Config, log *service.Logger, m *service.Metrics) *kinesisInput {
	return &kinesisInput{conf: c, log: log, metrics: m}
}

// Connect reaches Redis (failing, so Benthos retries, when it is down: a
// checkpoint is never guessed), then Kinesis, and starts reading. An error
// that will not pass by itself (see connectError) is retried less and less
// often.
func (k *kinesisInput) Connect(ctx context.Context) error {
	k.mu.Lock()
	defer k.mu.Unlock()
	if k.sess != nil || k.refused != nil {
		return nil
	}
	err := k.connectLocked(ctx)
	if err == nil {
		k.permanentFailures = 0
		return nil
	}
	if errors.Is(err, checkpointer.ErrInstanceIDInUse) {
		// ReadBatch ends the input: retrying would only wait again.
		k.refuseLocked(err)
		return nil
	}
	return k.connectError(err)
}

func (k *kinesisInput) connectLocked(ctx context.Context) error {
	if dl := k.conf.deadLetter; dl != nil {
		if dl.mgr == nil {
			return fmt.Errorf("field %s: the input was built without its resources, so the output resource %q cannot be reached", pathDeadLetter, dl.label)
		}
		if err := dl.prepare(ctx); err != nil {
			return err
		}
	}
	ckpt, err := checkpointer.New(ctx, k.conf.Checkpointer, k.log, k.metrics)
	if err != nil {
		return fmt.Errorf("connecting to the checkpoint store (Redis): %w", err)
	}
	// Each stream's store checks its keys when it joins; the group's
	// discovery hash, which only a pattern of streams needs, is checked
	// here, before anything is read.
	if k.conf.Consumer.FollowStreams {
		if err := ckpt.CheckDiscoveryPermissions(ctx); err != nil {
			_ = ckpt.Close()
			return fmt.Errorf("connecting to the checkpoint store (Redis): %w", err)
		}
	}
	awsCfg, err := k.conf.AWS.LoadLogged(ctx, k.log)
	if err != nil {
		_ = ckpt.Close()
		return fmt.Errorf("connecting to Kinesis: %w", err)
	}
	api := k.conf.AWS.KinesisClient(awsCfg)
	cons, err := coordinator.New(k.conf.Consumer, api, func(id string) consumer.Store {
		return ckpt.Stream(id)
	}, k.log, k.metrics)
	if err != nil {
		_ = ckpt.Close()
		return err
	}
	// The instance id is claimed before any stream is joined, so a second
	// process under a running one's id takes nothing (instance.go).
	claim, err := ckpt.ClaimInstance(ctx, cons.Owner())
	if err != nil {
		_ = ckpt.Close()
		return err
	}
	if err := cons.Start(ctx); err != nil {
		_ = claim.Release(ctx)
		_ = ckpt.Close()
		return err
	}
	k.sess = &session{cons: cons, ckpt: ckpt, claim: claim}
	k.watchClaim(k.sess)
	k.followStreams(k.sess, api)
	k.log.Debugf("Reading as group member %s", cons.Owner())
	return nil
}

func (k *kinesisInput) ReadBatch(ctx context.Context) (service.MessageBatch, service.AckFunc, error) {
	k.mu.Lock()
	s := k.sess
	k.mu.Unlock()
	if s == nil {
		if k.refusal() != nil {
			return nil, nil, service.ErrEndOfInput
		}
		return nil, nil, service.ErrNotConnected
	}
	k.watchStop(ctx, s)
	b, err := s.next(ctx)
	if err != nil {
		if k.refusal() != nil {
			return nil, nil, service.ErrEndOfInput
		}
		return nil, nil, err
	}
	batch := messages(b)
	// The indexer maps an output's per-message errors back to the records
	// (verdict.go); it tags the messages, so it runs before Benthos has them.
	idx := batch.Index()
	return batch, func(_ context.Context, err error) error {
		if err == nil {
			b.Ack(nil)
			return nil
		}
		if verdicts, named := messageVerdicts(idx, len(b.Records), err); named {
			b.AckRecords(verdicts)
		} else {
			b.Ack(err)
		}
		return nil
	}, nil
}
