package checkpointer

import (
	"crypto/tls"
	"fmt"
	"net/url"
	"strings"
	"time"

	"github.com/redpanda-data/benthos/v4/public/service"

	"github.com/connect-kinesis/connect-kinesis/internal/consumer"
	"github.com/connect-kinesis/connect-kinesis/internal/lintrule"
)

// Field names of the `checkpoint` and `lease` objects.
const (
	FieldCheckpoint         = "checkpoint"
	FieldRedis              = "redis"
	FieldRedisURL           = "url"
	FieldRedisKind          = "kind"
	FieldRedisMaster        = "master"
	FieldRedisTLS           = "tls"
	FieldMinReplicasToAck   = "min_replicas_to_ack"
	FieldReplicaAckTimeout  = "replica_ack_timeout"
	FieldGroup              = "group"
	FieldKeyPrefix          = "key_prefix"
	FieldCommitPeriod       = "commit_period"
	FieldLease              = "lease"
	FieldLeasePeriod        = "period"
	FieldRebalancePeriod    = "rebalance_period"
	FieldHandoffTimeout     = "handoff_timeout"
	FieldInstanceID         = "instance_id"
	FieldBalance            = "balance"
	fieldPathRedisURL       = FieldCheckpoint + "." + FieldRedis + "." + FieldRedisURL
	fieldPathRedisKind      = FieldCheckpoint + "." + FieldRedis + "." + FieldRedisKind
	fieldPathRedisMaster    = FieldCheckpoint + "." + FieldRedis + "." + FieldRedisMaster
	fieldPathMinReplicas    = FieldCheckpoint + "." + FieldRedis + "." + FieldMinReplicasToAck
	fieldPathReplicaTimeout = FieldCheckpoint + "." + FieldRedis + "." + FieldReplicaAckTimeout
	fieldPathGroup          = FieldCheckpoint + "." + FieldGroup
	fieldPathKeyPrefix      = FieldCheckpoint + "." + FieldKeyPrefix
	fieldPathCommitPeriod   = FieldCheckpoint + "." + FieldCommitPeriod
	fieldPathLeasePeriod    = FieldLease + "." + FieldLeasePeriod
	fieldPathRebalance      = FieldLease + "." + FieldRebalancePeriod
	fieldPathHandoffTimout  = FieldLease + "." + FieldHandoffTimeout
	fieldPathInstanceID     = FieldLease + "." + FieldInstanceID
	fieldPathBalance        = FieldLease + "." + FieldBalance
)

// Redis deployment kinds accepted by `checkpoint.redis.kind`.
const (
	KindSimple   = "simple"
	KindCluster  = "cluster"
	KindFailover = "failover"
)

// Defaults, shared by the fields, the CLI and tests.
const (
	DefaultKeyPrefix       = "kinesis"
	DefaultCommitPeriod    = 5 * time.Second
	DefaultLeasePeriod     = 10 * time.Second
	DefaultRebalancePeriod = 10 * time.Second
	DefaultHandoffTimeout  = 10 * time.Second
	DefaultBalance         = string(consumer.BalanceLoad)
	// DefaultReplicaAckTimeout bounds each WAIT for replicas.
	DefaultReplicaAckTimeout = time.Second
	// AutoReplicas is MinReplicasToAck's default, the automatic choice: 1
	// with kind failover or cluster when the master has replicas, else 0.
	AutoReplicas = -1
)

// Fields returns the `checkpoint` and `lease` objects a consumer embeds at its
// top level.
func Fields() []*service.ConfigField {
	return []*service.ConfigField{
		service.NewObjectField(FieldCheckpoint,
			service.NewObjectField(FieldRedis,
				// Not Secret(): Benthos scrubs every value of a secret field,
				// so `create` and the docs would show a placeholder that
				// fails at start. The URL field's own scrubber hides a URL
				// that holds a password.
				service.NewURLField(FieldRedisURL).
					Description("The Redis URL, e.g. `redis://localhost:6379`, or `rediss://user:${REDIS_PASSWORD}@redis.internal:6380/0` for TLS. Required. Credentials go in the URL (`echo` prints a password in the query as it is). See [tuning](../../tuning.md#checkpointredisurl-input).").
					LintRule(lintRedisURL),
				service.NewStringEnumField(FieldRedisKind, KindSimple, KindCluster, KindFailover).
					Description("How to reach Redis: `simple` (one server), `cluster` (Redis Cluster) or `failover` (Sentinel; the URL names the sentinels and `master` the monitored master).").
					LintRule(lintrule.Enum("checkpoint.redis.kind", "", KindSimple, KindCluster, KindFailover)).
					Default(KindSimple),
				service.NewStringField(FieldRedisMaster).
					Description("The Sentinel master name, required with `kind: failover`.").
					Default(""),
				service.NewTLSToggledField(FieldRedisTLS).
					Description("Custom TLS settings. When disabled, a `rediss://` URL still uses TLS with the system's roots."),
				service.NewIntField(FieldMinReplicasToAck).
					Description("-1 (the default): automatic, 1 with `kind: failover` or `cluster` when the master has a connected replica, else 0. How many replicas must acknowledge (`WAIT`) each commit. See [tuning](../../tuning.md#checkpointredismin_replicas_to_ack-input).").
					// A default rather than an optional field with an example:
					// `create` writes an optional field's first example, and a
					// written 1 made every commit against a Redis without
					// replicas fail.
					Default(AutoReplicas).Advanced(),
				service.NewDurationField(FieldReplicaAckTimeout).
					Description("How long a commit or a shard close waits for `min_replicas_to_ack` replicas before it is retried.").
					LintRule(lintrule.Duration(fieldPathReplicaTimeout, DefaultReplicaAckTimeout.String())).
					Default(DefaultReplicaAckTimeout.String()).Advanced(),
			).Description("Where checkpoints and leases are kept."),
			service.NewStringField(FieldGroup).
				Description("The consuming application's name, e.g. `orders-to-s3`: instances of one group share shards and checkpoints. Required, so two applications never share checkpoints by accident. See [checkpointer](../../checkpointer.md).").
				LintRule(lintGroup),
			service.NewStringField(FieldKeyPrefix).
				Description("The prefix of every Redis key, e.g. `kinesis:{group:stream}:ckpt`.").
				Default(DefaultKeyPrefix).Advanced(),
			service.NewDurationField(FieldCommitPeriod).
				Description("How often each shard's highest contiguously acknowledged position is written to Redis. After a crash at most this much is delivered again. A graceful shutdown and a hand-off commit at once.").
				LintRule(lintrule.Duration(fieldPathCommitPeriod, DefaultCommitPeriod.String())).
				Default(DefaultCommitPeriod.String()),
		).Description("Checkpoints, kept in Redis, so that a restarted or added instance resumes where the group left off."),
		service.NewObjectField(FieldLease,
			service.NewDurationField(FieldLeasePeriod).
				Description("How long a shard lease lasts without renewal (renewed every third of it). A dead instance's shards are taken over after about `period + rebalance_period`.").
				LintRule(lintrule.Duration(fieldPathLeasePeriod, DefaultLeasePeriod.String())).
				Default(DefaultLeasePeriod.String()).Advanced(),
			service.NewDurationField(FieldRebalancePeriod).
				Description("How often an instance takes free shards up to its fair share, or asks an instance holding more than its share to hand one over.").
				LintRule(lintrule.Duration(fieldPathRebalance, DefaultRebalancePeriod.String())).
				Default(DefaultRebalancePeriod.String()).Advanced(),
			service.NewDurationField(FieldHandoffTimeout).
				Description("10s (the default): how long an instance handing a shard over waits for in-flight messages to be acknowledged before it commits and releases the lease anyway. See [tuning](../../tuning.md#leasehandoff_timeout-input).").
				LintRule(lintrule.Duration(fieldPathHandoffTimout, DefaultHandoffTimeout.String())).
				Default(DefaultHandoffTimeout.String()).Advanced(),
			service.NewStringEnumField(FieldBalance, string(consumer.BalanceLoad), string(consumer.BalanceCount)).
				Description("`load` (the default): the instances even out the bytes per second they read, so hot shards spread out. `count`: even out the number of shards. See [tuning](../../tuning.md#leasebalance-input).").
				LintRule(lintrule.Enum("lease.balance", "", string(consumer.BalanceLoad), string(consumer.BalanceCount))).
				Default(DefaultBalance).Advanced(),
			service.NewStringField(FieldInstanceID).
				Description("Empty (the default): host name, process id and a random suffix. This instance's name in the group (leases' owner, logs), e.g. `${POD_NAME}`. A second process under a running one's name exits with status 1. See [deploy](../../deploy.md#the-instance-id).").
				Example("${POD_NAME}").
				LintRule(lintInstanceID).
				Default("").Advanced(),
		).Description("Shard leases: which instance of the group reads which shard.").Advanced(),
	}
}

// Config is the parsed form of Fields.
type Config struct {
	// RedisURL holds credentials: never log it (see RedactURL).
	RedisURL, RedisKind, RedisMaster string
	// TLS overrides the TLS settings implied by the URL; nil keeps them.
	TLS              *tls.Config
	Group, KeyPrefix string
	// InstanceID names this instance in the group; empty means generated.
	InstanceID string
	// MinReplicasToAck is AutoReplicas (-1) for the automatic choice.
	MinReplicasToAck  int
	ReplicaAckTimeout time.Duration

	CommitPeriod, LeasePeriod, RebalancePeriod, HandoffTimeout time.Duration
	// Balance is lease.balance: load or count.
	Balance string
}

// DefaultConfig returns a Config with every default set; RedisURL and Group
// are left for the caller.
func DefaultConfig() Config {
	return Config{
		RedisKind:       KindSimple,
		KeyPrefix:       DefaultKeyPrefix,
		CommitPeriod:    DefaultCommitPeriod,
		LeasePeriod:     DefaultLeasePeriod,
		RebalancePeriod: DefaultRebalancePeriod,
		HandoffTimeout:  DefaultHandoffTimeout,
		Balance:         DefaultBalance,

		MinReplicasToAck:  AutoReplicas,
		ReplicaAckTimeout: DefaultReplicaAckTimeout,
	}
}

// ConfigFromParsed reads the fields added by Fields and validates them.
func ConfigFromParsed(conf *service.ParsedConfig) (Config, error) {
	var c Config
	var err error
	ck := conf.Namespace(FieldCheckpoint)
	rc := ck.Namespace(FieldRedis)
	if c.RedisURL, err = rc.FieldString(FieldRedisURL); err != nil {
		return c, err
	}
	if c.RedisKind, err = rc.FieldString(FieldRedisKind); err != nil {
		return c, err
	}
	if c.RedisMaster, err = rc.FieldString(FieldRedisMaster); err != nil {
		return c, err
	}
	tlsConf, enabled, err := rc.FieldTLSToggled(FieldRedisTLS)
	if err != nil {
		return c, fmt.Errorf("field %s.%s: %w", FieldCheckpoint+"."+FieldRedis, FieldRedisTLS, err)
	}
	if enabled {
		c.TLS = tlsConf
	}
	if c.MinReplicasToAck, err = rc.FieldInt(FieldMinReplicasToAck); err != nil {
		return c, err
	}
	if c.ReplicaAckTimeout, err = rc.FieldDuration(FieldReplicaAckTimeout); err != nil {
		return c, err
	}
	if c.Group, err = ck.FieldString(FieldGroup); err != nil {
		return c, err
	}
	if c.KeyPrefix, err = ck.FieldString(FieldKeyPrefix); err != nil {
		return c, err
	}
	if c.CommitPeriod, err = ck.FieldDuration(FieldCommitPeriod); err != nil {
		return c, err
	}
	lc := conf.Namespace(FieldLease)
	if c.LeasePeriod, err = lc.FieldDuration(FieldLeasePeriod); err != nil {
		return c, err
	}
	if c.RebalancePeriod, err = lc.FieldDuration(FieldRebalancePeriod); err != nil {
		return c, err
	}
	if c.HandoffTimeout, err = lc.FieldDuration(FieldHandoffTimeout); err != nil {
		return c, err
	}
	if c.InstanceID, err = lc.FieldString(FieldInstanceID); err != nil {
		return c, err
	}
	if c.Balance, err = lc.FieldString(FieldBalance); err != nil {
		return c, err
	}
	return c, c.Validate()
}

// minLeasePeriod keeps renewals (every third of the period) well above a
// Redis round trip; below it leases would flap on any hiccup.
const minLeasePeriod = 100 * time.Millisecond

// Validate names the first invalid field and what it accepts.
func (c Config) Validate() error {
	if c.RedisURL == "" {
		return fmt.Errorf("field %s: required, e.g. redis://localhost:6379", fieldPathRedisURL)
	}
	u, err := url.Parse(c.RedisURL)
	if err != nil {
		// The parse error quotes the URL, with its password: do not wrap it.
		return fmt.Errorf("field %s: not a valid URL (redis://[user:password@]host:port[/db] or rediss://...)", fieldPathRedisURL)
	}
	if u.Scheme != "redis" && u.Scheme != "rediss" {
		return fmt.Errorf("field %s: scheme %q is not supported; use redis:// or rediss://", fieldPathRedisURL, u.Scheme)
	}
	switch c.RedisKind {
	case KindSimple, KindCluster:
	case KindFailover:
		if c.RedisMaster == "" && u.Query().Get("master_name") == "" {
			return fmt.Errorf("field %s: required with %s: failover (the Sentinel master name)", fieldPathRedisMaster, fieldPathRedisKind)
		}
	default:
		return fmt.Errorf("field %s: %q is not one of simple, cluster, failover", fieldPathRedisKind, c.RedisKind)
	}
	if c.Balance != string(consumer.BalanceLoad) && c.Balance != string(consumer.BalanceCount) {
		return fmt.Errorf("field %s: %q is not one of %s, %s", fieldPathBalance, c.Balance, consumer.BalanceLoad, consumer.BalanceCount)
	}
	if c.Group == "" {
		return fmt.Errorf("field %s: required; it names the consuming application, e.g. orders-to-s3", fieldPathGroup)
	}
	// A brace in the group would end the Redis Cluster hash tag early and
	// scatter a stream's keys over slots (CROSSSLOT in every script).
	if strings.ContainsAny(c.Group, "{}") {
		return fmt.Errorf("field %s: %q must not contain '{' or '}'", fieldPathGroup, c.Group)
	}
	if c.KeyPrefix == "" || strings.ContainsAny(c.KeyPrefix, "{}") {
		return fmt.Errorf("field %s: %q must be non-empty and without '{' or '}'", fieldPathKeyPrefix, c.KeyPrefix)
	}
	if c.CommitPeriod <= 0 {
		return fmt.Errorf("field %s: %v must be a positive duration, e.g. 5s", fieldPathCommitPeriod, c.CommitPeriod)
	}
	if c.LeasePeriod < minLeasePeriod {
		return fmt.Errorf("field %s: %v must be at least %v, e.g. 10s", fieldPathLeasePeriod, c.LeasePeriod, minLeasePeriod)
	}
	if c.RebalancePeriod <= 0 {
		return fmt.Errorf("field %s: %v must be a positive duration, e.g. 10s", fieldPathRebalance, c.RebalancePeriod)
	}
	if c.MinReplicasToAck < AutoReplicas {
		return fmt.Errorf("field %s: %d must be 0 or more, or -1 for the automatic choice", fieldPathMinReplicas, c.MinReplicasToAck)
	}
	if c.MinReplicasToAck != 0 && c.ReplicaAckTimeout <= 0 {
		return fmt.Errorf("field %s: %v must be a positive duration, e.g. 1s", fieldPathReplicaTimeout, c.ReplicaAckTimeout)
	}
	if c.HandoffTimeout <= 0 {
		return fmt.Errorf("field %s: %v must be a positive duration, e.g. 10s", fieldPathHandoffTimout, c.HandoffTimeout)
	}
	if !validInstanceID(c.InstanceID) {
		return fmt.Errorf("field %s: %q must be at most %d characters without spaces or '|', e.g. the pod name", fieldPathInstanceID, c.InstanceID, maxInstanceIDLength)
	}
	return nil
}

// maxInstanceIDLength bounds lease.instance_id: it is stored in every lease
// value and member entry.
const maxInstanceIDLength = 200

// validInstanceID accepts an empty id (generated) or a printable one without
// spaces or '|', the separator inside a lease value.
func validInstanceID(id string) bool {
	if len(id) > maxInstanceIDLength {
		return false
	}
	for _, r := range id {
		if r == '|' || r <= ' ' || r == 0x7f {
			return false
		}
	}
	return true
}
