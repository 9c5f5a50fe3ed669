package ops

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"os"
	"strings"

	"github.com/urfave/cli/v2"

	"github.com/connect-kinesis/connect-kinesis/internal/awsconf"
	"github.com/connect-kinesis/connect-kinesis/plugins/checkpointer"
)

// Flag names of `connect-kinesis checkpoints`.
const (
	flagRedisURL       = "redis-url"
	flagRedisKind      = "redis-kind"
	flagRedisMaster    = "redis-master"
	flagRedisCAFile    = "redis-tls-ca-file"
	flagRedisSkipCheck = "redis-tls-skip-verify"
	flagGroup          = "group"
	flagKeyPrefix      = "key-prefix"
	flagStream         = "stream"
	flagStreamID       = "stream-id"
	flagRegion         = "region"
	flagEndpoint       = "endpoint"
	flagProfile        = "profile"
	flagLeasePeriod    = "lease-period"
	flagJSON           = "json"
	flagTo             = "to"
	flagForce          = "force"
	flagYes            = "yes"
	flagFrom           = "from"
	flagTable          = "table"
	flagDynamoEndpoint = "dynamodb-endpoint"
	flagSourceStream   = "source-stream"
	flagDryRun         = "dry-run"
	flagOutput         = "output"
	flagWatch          = "watch"
	flagAtTimestamp    = "at-timestamp"
	flagAllowRewind    = "allow-rewind"
)

// CheckpointsCommand is `connect-kinesis checkpoints`: inspect, reset and delete a
// consumer group's checkpoints and leases on one stream.
func CheckpointsCommand() *cli.Command {
	common := func(extra ...cli.Flag) []cli.Flag { return commonFlags(streamOne, extra...) }
	// import takes a pattern too (each matching stream of the region).
	onePattern := func(extra ...cli.Flag) []cli.Flag { return commonFlags(streamOneOrPattern, extra...) }
	// show and export take no stream (every stream of the group) or a
	// pattern of stream names.
	anyStream := func(extra ...cli.Flag) []cli.Flag { return commonFlags(streamAny, extra...) }
	return markRequired(&cli.Command{
		Name:  "checkpoints",
		Usage: "Inspect, reset, import, export or delete a consumer group's Kinesis checkpoints in Redis",
		Description: "Works on the keys <key-prefix>:{<group>:<stream ARN>}:ckpt|closed|lease|members|handoff|progress.\n" +
			"See docs/checkpointer.md.",
		Subcommands: []*cli.Command{
			{
				Name:  "show",
				Usage: "Print each shard's state, lease and checkpoint, and the live members; without --stream, the group's streams",
				Flags: anyStream(
					&cli.BoolFlag{Name: flagJSON, Usage: "print JSON"},
					&cli.BoolFlag{Name: flagWatch, Aliases: []string{"w"}, Usage: "redraw every second until Ctrl-C"},
				),
				Action: runShow,
			},
			{
				Name:  "reset",
				Usage: "Move the group to a new start: trim_horizon, latest, at_timestamp=RFC3339 or sequences=FILE",
				Flags: commonFlags(streamOneOrSet,
					// The first backtick pair of a usage is the value's placeholder.
					&cli.StringFlag{Name: flagTo, Usage: "where the group moves (`MODE`): trim_horizon | latest | at_timestamp=<RFC3339> | sequences=<FILE> (JSON: {\"shardId\": \"<seq>[/<sub>]\"|\"SHARD_END\"}, the output of 'show --json', or an export)", Required: true},
					&cli.BoolFlag{Name: flagYes, Usage: "confirm the reset: it replaces every checkpoint of the group (without --yes it prints what it would change and writes nothing)"},
					&cli.BoolFlag{Name: flagForce, Usage: "reset even while pipelines hold live leases (they are fenced out)"},
					&cli.BoolFlag{Name: flagAllowOtherOrigin, Usage: "restore a sequences file written for another stream or group"},
				),
				Action: runReset,
			},
			{
				Name: "import",
				Usage: "Carry checkpoints over from Redpanda Connect's aws_kinesis DynamoDB table or a KCL 2.x/3.x lease table " +
					"(replaces the group's checkpoints, as reset does)",
				Flags: onePattern(
					&cli.StringFlag{Name: flagFrom, Usage: SourceConnect + " (a Redpanda Connect aws_kinesis checkpoint table) or " + SourceKCL + " (a KCL 2.x/3.x lease table)", Required: true},
					&cli.StringFlag{Name: flagTable, Usage: "the DynamoDB table to read", Required: true},
					&cli.StringFlag{Name: flagDynamoEndpoint, Usage: "DynamoDB endpoint URL, e.g. an emulator (default: the region's)"},
					&cli.StringFlag{Name: flagSourceStream, Usage: "the source's key of the stream: Connect's StreamID, or a KCL multi-stream identifier <account>:<name>:<epoch> (default: found from --stream)"},
					&cli.BoolFlag{Name: flagDryRun, Usage: "print what would be written and change nothing"},
					&cli.StringFlag{Name: flagAtTimestamp, Usage: "the KCL application's initial position timestamp (RFC3339), where its leases at AT_TIMESTAMP start: the table does not hold it"},
					&cli.StringSliceFlag{Name: flagAllowOpenShard, Usage: "import a SHARD_END (or a start under other parents) the source gives this shard although the stream lists it open; repeat for each shard"},
					&cli.BoolFlag{Name: flagAllowRewind, Usage: "import even when it moves the group's checkpoints back (what was read since is read again)"},
					&cli.BoolFlag{Name: flagIgnoreLiveSource, Usage: "import even though the source's leases look live (its consumer must be stopped all the same: a paused one resumes and moves its checkpoints on)"},
					&cli.BoolFlag{Name: flagFenceReaders, Usage: "import even while pipelines of the group hold live leases: they are fenced out (their next renewal or commit fails and they stop reading those shards)"},
					&cli.BoolFlag{Name: flagForce, Usage: "deprecated: the same as --" + flagIgnoreLiveSource + " --" + flagFenceReaders},
				),
				Action: runImport,
			},
			{
				Name:  "export",
				Usage: "Write the group's checkpoints, closed shards and start override as JSON; `reset --to sequences=FILE` restores them (with a pattern as --stream, one document per matching stream; without --stream, every stream of the group)",
				Flags: anyStream(
					&cli.StringFlag{Name: flagOutput, Aliases: []string{"o"}, Usage: "file to write (default: standard output)"},
				),
				Action: runExport,
			},
			{
				Name:  "delete",
				Usage: "Delete every key of the group on the stream",
				Flags: common(
					&cli.BoolFlag{Name: flagYes, Usage: "confirm the deletion"},
					&cli.BoolFlag{Name: flagForce, Usage: "delete even while leases are live (never while instances of the group run: they would write their state back)"},
				),
				Action: runDelete,
			},
		},
	})
}

// markRequired ends the usage of every required flag of the subcommands
// with "(required)": the help does not say so otherwise.
func markRequired(cmd *cli.Command) *cli.Command {
	for _, sub := range cmd.Subcommands {
		for _, f := range sub.Flags {
			if sf, ok := f.(*cli.StringFlag); ok && sf.Required {
				sf.Usage += " (required)"
			}
		}
	}
	return cmd
}

// opened is what every subcommand starts from.
type opened struct {
	cp     *checkpointer.Checkpointer
	store  *checkpointer.Store
	stream streamInfo
	// listed is false with --stream-id: the shards are unknown.
	listed bool
	// relist lists the stream's shards again (nil with --stream-id).
	relist func(ctx context.Context) (streamInfo, error)
	// api is the Kinesis client (nil with --stream-id).
	api kinesisAPI
}

// checkpointerConfig is the checkpointer's configuration from the flags.
func checkpointerConfig(c *cli.Context) (checkpointer.Config, error) {
	cfg := checkpointer.DefaultConfig()
	cfg.RedisURL = c.String(flagRedisURL)
	cfg.RedisKind = c.String(flagRedisKind)
	cfg.RedisMaster = c.String(flagRedisMaster)
	cfg.Group = c.String(flagGroup)
	cfg.KeyPrefix = c.String(flagKeyPrefix)
	cfg.LeasePeriod = c.Duration(flagLeasePeriod)
	if caFile, skip := c.String(flagRedisCAFile), c.Bool(flagRedisSkipCheck); caFile != "" || skip {
		t := &tls.Config{MinVersion: tls.VersionTLS12, InsecureSkipVerify: skip} //nolint:gosec // the operator asked for it
		if caFile != "" {
			pem, err := os.ReadFile(caFile)
			if err != nil {
				return cfg, fmt.Errorf("flag --%s: %w", flagRedisCAFile, err)
			}
			t.RootCAs = x509.NewCertPool()
			if !t.RootCAs.AppendCertsFromPEM(pem) {
				return cfg, fmt.Errorf("flag --%s: no PEM certificate in %s", flagRedisCAFile, caFile)
			}
		}
		cfg.TLS = t
	}
	if err := cfg.Validate(); err != nil {
		return cfg, flagError(err)
	}
	return cfg, nil
}

func openFromFlags(c *cli.Context) (*opened, error) {
	return openStream(c, c.String(flagStream), c.String(flagStreamID))
}

// openStream opens the group's checkpoints of one stream, named by stream
// (its name or ARN, looked up in Kinesis) or by its key identity id.
func openStream(c *cli.Context, stream, id string) (*opened, error) {
	ctx := c.Context
	cfg, err := checkpointerConfig(c)
	if err != nil {
		return nil, err
	}
	if stream == "" && id == "" {
		return nil, fmt.Errorf("flag --%s: name the stream (its name or ARN)", flagStream)
	}
	o := &opened{}
	if id != "" {
		o.stream = streamInfo{ID: id, Name: stream}
	} else {
		settings := awsconf.Settings{Region: c.String(flagRegion), Endpoint: c.String(flagEndpoint), Profile: c.String(flagProfile)}
		awsCfg, err := settings.Load(ctx)
		if err != nil {
			return nil, fmt.Errorf("%w; --%s is looked up in Kinesis, for its ARN, which names the group's keys, and its shards; --%s with the STREAM ID `show --group` prints reads Redis alone", flagError(err), flagStream, flagStreamID)
		}
		api := settings.KinesisClient(awsCfg)
		info, err := describeStream(ctx, api, stream)
		if err != nil {
			if errors.Is(err, ErrStreamNotFound) {
				return nil, fmt.Errorf("stream %q not found in region %s (check --stream, --region and --endpoint)", stream, awsCfg.Region)
			}
			return nil, err
		}
		o.stream, o.listed, o.api = info, true, api
		o.relist = func(ctx context.Context) (streamInfo, error) { return describeStream(ctx, api, stream) }
	}

	cp, err := checkpointer.New(ctx, cfg, nil, nil)
	if err != nil {
		return nil, flagError(err)
	}
	o.cp, o.store = cp, cp.Stream(o.stream.ID)
	return o, nil
}

// flagOfField maps the config fields the checkpointer's and the AWS
// settings' validation name to the flags that set them.
var flagOfField = map[string]string{
	fieldPath(checkpointer.FieldCheckpoint, checkpointer.FieldRedis, checkpointer.FieldRedisURL):    flagRedisURL,
	fieldPath(checkpointer.FieldCheckpoint, checkpointer.FieldRedis, checkpointer.FieldRedisKind):   flagRedisKind,
	fieldPath(checkpointer.FieldCheckpoint, checkpointer.FieldRedis, checkpointer.FieldRedisMaster): flagRedisMaster,
	fieldPath(checkpointer.FieldCheckpoint, checkpointer.FieldGroup):                                flagGroup,
	fieldPath(checkpointer.FieldCheckpoint, checkpointer.FieldKeyPrefix):                            flagKeyPrefix,
	fieldPath(checkpointer.FieldLease, checkpointer.FieldLeasePeriod):                               flagLeasePeriod,
	awsconf.FieldRegion:   flagRegion,
	awsconf.FieldEndpoint: flagEndpoint,
	fieldPath(awsconf.FieldCredentials, awsconf.FieldProfile): flagProfile,
}

func fieldPath(names ...string) string { return strings.Join(names, ".") }

// flagError turns the config field names in err's message into the flags
// that set them ("field region" -> "flag --region", "set `region`" ->
// "pass --region"), keeping err for errors.Is.
func flagError(err error) error {
	msg := err.Error()
	for field, flag := range flagOfField {
		msg = strings.ReplaceAll(msg, "field "+field, "flag --"+flag)
		msg = strings.ReplaceAll(msg, "set `"+field+"`", "pass --"+flag)
	}
	msg = strings.ReplaceAll(msg, " or AWS_REGION", " or set AWS_REGION")
	if msg == err.Error() {
		return err
	}
	return renamedError{msg: msg, err: err}
}

// renamedError is an error with its message reworded for the command line.
type renamedError struct {
	msg string
	err error
}

func (e renamedError) Error() string { return e.msg }
func (e renamedError) Unwrap() error { return e.err }

// What a subcommand's --stream takes.
const (
	streamOne = iota
	streamOneOrPattern
	streamAny
	// streamOneOrSet: one stream, or none for every stream of a set
	// export given to reset.
	streamOneOrSet
)

// commonFlags are the flags every subcommand takes.
func commonFlags(streamKind int, extra ...cli.Flag) []cli.Flag {
	stream := &cli.StringFlag{Name: flagStream, Usage: "the stream name or ARN", Required: true}
	switch streamKind {
	case streamOneOrPattern:
		stream.Usage = "the stream name or ARN, or a pattern of names with * and ? (every stream of the region that matches and that the source holds)"
	case streamOneOrSet:
		stream = &cli.StringFlag{Name: flagStream, Usage: "the stream name or ARN (required, except with --to sequences=FILE of an export of several streams: then every stream of the file, or the one named)"}
	case streamAny:
		stream = &cli.StringFlag{Name: flagStream, Usage: "the stream name or ARN, or a pattern of names with * and ? (the group's streams in Redis that match); none: every stream the group has state on"}
	}
	return append([]cli.Flag{
		&cli.StringFlag{Name: flagRedisURL, Usage: "Redis URL (credentials in it are never printed)", EnvVars: []string{"CONNECT_KINESIS_REDIS_URL"}, Required: true},
		&cli.StringFlag{Name: flagRedisKind, Usage: "simple, cluster or failover", Value: checkpointer.KindSimple},
		&cli.StringFlag{Name: flagRedisMaster, Usage: "Sentinel master name (with --redis-kind failover)"},
		&cli.StringFlag{Name: flagRedisCAFile, Usage: "PEM file of CAs to trust for a rediss:// URL"},
		&cli.BoolFlag{Name: flagRedisSkipCheck, Usage: "do not verify the Redis server's certificate"},
		&cli.StringFlag{Name: flagGroup, Usage: "the consumer group (checkpoint.group)", Required: true},
		&cli.StringFlag{Name: flagKeyPrefix, Usage: "checkpoint.key_prefix", Value: checkpointer.DefaultKeyPrefix},
		stream,
		&cli.StringFlag{Name: flagStreamID, Usage: "skip the Kinesis lookup and use this key identity (the stream ARN); for a deleted stream"},
		&cli.StringFlag{Name: flagRegion, Usage: "AWS region (default: the SDK's chain)"},
		&cli.StringFlag{Name: flagEndpoint, Usage: "Kinesis endpoint URL, e.g. an emulator"},
		&cli.StringFlag{Name: flagProfile, Usage: "AWS shared-config profile (default: the SDK's chain)"},
		&cli.DurationFlag{Name: flagLeasePeriod, Usage: "lease.period of the pipelines, to judge which members are live", Value: checkpointer.DefaultLeasePeriod},
	}, extra...)
}
