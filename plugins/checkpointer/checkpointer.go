package checkpointer

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/redpanda-data/benthos/v4/public/service"
)

// Metric names.
const (
	MetricCommits = "kinesis_checkpoint_commits_total"
	MetricErrors  = "kinesis_checkpoint_errors_total"
	// MetricCommitLatency times each checkpoint write (Commit), failed ones
	// included, replica acknowledgement included.
	MetricCommitLatency = "kinesis_checkpoint_commit_latency_ns"
)

// Redis client timeouts. A Redis that is down or frozen must surface as an
// error within seconds: the input then stops committing and, before its
// leases run out, stops reading, instead of hanging on a call.
const (
	redisDialTimeout = 2 * time.Second
	redisIOTimeout   = 3 * time.Second
)

// Checkpointer is a connection to Redis for one consumer group.
type Checkpointer struct {
	client     redis.UniversalClient
	ownsClient bool
	cfg        Config
	log        *service.Logger

	// Labelled by stream name, as the input's metrics are.
	commits       *service.MetricCounter
	errors        *service.MetricCounter
	commitLatency *service.MetricTimer

	closeOnce sync.Once
	closeErr  error
}

// New builds the Redis client cfg describes and pings it, so an unreachable
// Redis fails here with a clear error. log and metrics may be nil.
func New(ctx context.Context, cfg Config, log *service.Logger, metrics *service.Metrics) (*Checkpointer, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	routeRedisLogs(log)
	client, err := NewRedisClient(cfg)
	if err != nil {
		return nil, err
	}
	// Every call of this client goes through the hook, so a missing ACL
	// permission is named, with the rules to grant, wherever it shows; a
	// Cluster's node clients too (the replica check and WAIT use them).
	hook := newPermissionHook(log)
	client.AddHook(hook)
	if cl, ok := client.(*redis.ClusterClient); ok {
		// The reload hook goes on the node clients too: a write waited
		// for replicas runs on a connection of its master's node client,
		// and the replica probe asks that node, neither through the
		// cluster client, so their failures on a dead master would
		// otherwise never ask for a reload.
		reload := clusterReloadHook{reload: cl.ReloadState}
		cl.OnNewNode(func(n *redis.Client) {
			n.AddHook(hook)
			n.AddHook(reload)
		})
		cl.AddHook(reload)
	}
	if err := client.Ping(ctx).Err(); err != nil {
		_ = client.Close()
		// The field, not the URL: the URL may hold a password, and the
		// field is what the user edits. The error names the address.
		return nil, fmt.Errorf("field %s: reaching Redis: %w", fieldPathRedisURL, err)
	}
	c := NewFromClient(client, cfg, log, metrics)
	c.ownsClient = true
	c.log.With("redis", RedactURL(cfg.RedisURL), "kind", cfg.RedisKind, "group", cfg.Group).Debug("Connected to the checkpoint store")
	if log != nil && (cfg.RedisKind == KindSimple || cfg.RedisKind == "") && cfg.MinReplicasToAck == AutoReplicas {
		c.warnOfReplicas(ctx)
	}
	return c, nil
}

// warnOfReplicas warns when a server reached as kind simple, with the
// automatic min_replicas_to_ack (0 for simple), is a master with replicas:
// a managed primary endpoint that fails over, say. Nothing is then waited
// for, so a failover can lose the last commits and closes, and a lost close
// lets a child be read before its parent is read again. Only a warning: a
// replica kept for backups alone is a fine reason to wait for none.
func (c *Checkpointer) warnOfReplicas(ctx context.Context) {
	info, err := c.client.Info(ctx, "replication").Result()
	if err != nil {
		c.log.Debugf("Could not ask the checkpoint store for its replicas (INFO replication): %v", err)
		return
	}
	if n := connectedReplicas(info); n > 0 {
		c.log.Warnf("The checkpoint store is a master with %d connected replica(s), but %s is simple with %s automatic, so no commit or shard close waits for a replica: "+
			"a failover can lose the last of them, a close included (a parent shard read again after its child). Set %s to failover or cluster, or %s to 1; set %s to 0 to silence this",
			n, fieldPathRedisKind, fieldPathMinReplicas, fieldPathRedisKind, fieldPathMinReplicas, fieldPathMinReplicas)
	}
}

// NewFromClient wraps a client the caller built and keeps owning: Close does
// not close it.
func NewFromClient(client redis.UniversalClient, cfg Config, log *service.Logger, metrics *service.Metrics) *Checkpointer {
	return &Checkpointer{
		client:        client,
		cfg:           cfg,
		log:           log,
		commits:       metrics.NewCounter(MetricCommits, "stream"),
		errors:        metrics.NewCounter(MetricErrors, "stream"),
		commitLatency: metrics.NewTimer(MetricCommitLatency, "stream"),
	}
}

// NewRedisClient builds (without connecting) the go-redis client for the
// URL, kind, master and TLS settings of cfg.
//
// go-redis parses a URL only into the options of one kind (its query
// options, e.g. pool_size, included), and has no way from those to
// UniversalOptions; so each kind is parsed and built by its own go-redis
// functions, and every kind gets the same limits from clientLimits.
func NewRedisClient(cfg Config) (redis.UniversalClient, error) {
	// go-redis' parse errors may quote the URL, password included, so they
	// are reported without it.
	parseErr := func(err error) error {
		return fmt.Errorf("field %s: parsing %s: %s", fieldPathRedisURL, RedactURL(cfg.RedisURL), redactErr(err, cfg.RedisURL))
	}
	switch cfg.RedisKind {
	case KindSimple, "":
		o, err := redis.ParseURL(cfg.RedisURL)
		if err != nil {
			return nil, parseErr(err)
		}
		clientLimits{&o.TLSConfig, &o.DialTimeout, &o.ReadTimeout, &o.WriteTimeout, &o.ContextTimeoutEnabled, &o.MaxRetries, &o.DialerRetries, &o.DisableIdentity}.apply(cfg.TLS)
		return redis.NewClient(o), nil
	case KindCluster:
		o, err := redis.ParseClusterURL(cfg.RedisURL)
		if err != nil {
			return nil, parseErr(err)
		}
		// MaxRedirects stays: following MOVED/ASK is routing, not retrying.
		clientLimits{&o.TLSConfig, &o.DialTimeout, &o.ReadTimeout, &o.WriteTimeout, &o.ContextTimeoutEnabled, &o.MaxRetries, &o.DialerRetries, &o.DisableIdentity}.apply(cfg.TLS)
		return redis.NewClusterClient(o), nil
	case KindFailover:
		o, err := redis.ParseFailoverURL(cfg.RedisURL)
		if err != nil {
			return nil, parseErr(err)
		}
		if cfg.RedisMaster != "" {
			o.MasterName = cfg.RedisMaster
		}
		// The URL's userinfo is the data's (the master's) credentials;
		// sentinels usually run without AUTH, and AUTH to a server without
		// a password fails the connection. A URL in go-redis' own form,
		// the master's in `username`/`password` query parameters, keeps
		// its userinfo for the sentinels, as go-redis reads it.
		if o.Username == "" && o.Password == "" {
			o.Username, o.Password = o.SentinelUsername, o.SentinelPassword
			o.SentinelUsername, o.SentinelPassword = "", ""
		}
		clientLimits{&o.TLSConfig, &o.DialTimeout, &o.ReadTimeout, &o.WriteTimeout, &o.ContextTimeoutEnabled, &o.MaxRetries, &o.DialerRetries, &o.DisableIdentity}.apply(cfg.TLS)
		return redis.NewFailoverClient(o), nil
	default:
		return nil, fmt.Errorf("field %s: %q is not one of simple, cluster, failover", fieldPathRedisKind, cfg.RedisKind)
	}
}

// clientLimits points at the settings every kind of go-redis options has,
// so that one function sets them alike for all three.
type clientLimits struct {
	tls                                    **tls.Config
	dialTimeout, readTimeout, writeTimeout *time.Duration
	contextTimeout                         *bool
	maxRetries, dialerRetries              *int
	disableIdentity                        *bool
}

// apply sets the TLS override, the timeouts and no retries.
func (l clientLimits) apply(custom *tls.Config) {
	*l.tls = pickTLS(*l.tls, custom)
	*l.dialTimeout, *l.readTimeout, *l.writeTimeout = redisDialTimeout, redisIOTimeout, redisIOTimeout
	*l.contextTimeout = true
	// Retries belong to the caller (the input retries a failed commit at its
	// next period and judges leases by their deadline); retrying here too
	// would multiply delays while Redis is down.
	*l.maxRetries = -1
	*l.dialerRetries = 1
	// go-redis names itself on each connection with CLIENT SETINFO, which
	// Redis before 7.2 does not know and an ACL rule on 7.0 cannot even
	// name: without it the users of docs/deploy.md need no CLIENT
	// permission and refuse nothing the clients send.
	*l.disableIdentity = true
}

// pickTLS lets the `tls` field override what the URL scheme implies, keeping
// the server name go-redis derived from the URL host.
func pickTLS(fromURL, custom *tls.Config) *tls.Config {
	if custom == nil {
		return fromURL
	}
	c := custom.Clone()
	if c.ServerName == "" && fromURL != nil {
		c.ServerName = fromURL.ServerName
	}
	return c
}

// Config returns the configuration the checkpointer runs with.
func (c *Checkpointer) Config() Config { return c.cfg }

// Client is the underlying Redis client.
func (c *Checkpointer) Client() redis.UniversalClient { return c.client }

// Close closes the Redis client when New built it. Idempotent.
func (c *Checkpointer) Close() error {
	c.closeOnce.Do(func() {
		if c.ownsClient {
			c.closeErr = c.client.Close()
		}
	})
	return c.closeErr
}

// Stream returns the store of one stream's keys. streamID is the stream's
// ARN, or its name where the service gives no ARN (kinesalite), so a stream
// configured by name or by ARN reaches the same checkpoints.
func (c *Checkpointer) Stream(streamID string) *Store {
	tag := "{" + c.cfg.Group + ":" + streamID + "}"
	base := c.cfg.KeyPrefix + ":" + tag + ":"
	return &Store{
		c:        c,
		streamID: streamID,
		log:      c.log.With("stream", streamID),
		keys: Keys{
			Checkpoints: base + "ckpt",
			Closed:      base + "closed",
			Leases:      base + "lease",
			Members:     base + "members",
			Handoff:     base + "handoff",
			Progress:    base + "progress",
			Delivered:   base + "delivered",
			Epoch:       base + "epoch",
		},
	}
}

// ErrLiveLeases is returned, matched with errors.Is, when an operator
// command refused because instances hold live leases. The lease errors of
// the store are the consumer's (consumer.ErrLeaseHeld, consumer.ErrLeaseLost).
var ErrLiveLeases = errors.New("live leases exist")

// ErrLiveMembers is returned, matched with errors.Is, when `delete` refused
// because instances of the group are running: they would re-seed the
// deleted state at once.
var ErrLiveMembers = errors.New("instances of the group are running")
