package checkpointer

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"sort"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/urfave/cli/v2"

	"github.com/connect-kinesis/connect-kinesis/internal/awsconf"
	"github.com/connect-kinesis/connect-kinesis/internal/consumer"
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
)

// Shard states printed by `show`.
const (
	StateOpen              = "open"
	StateReady             = "ready"
	StateWaitingForParents = "waiting-for-parents"
	StateClosed            = "closed"
	StateTrimmed           = "trimmed"
)

// CLICommand is `connect-kinesis checkpoints`: inspect, reset and delete a
// consumer group's checkpoints and leases on one stream.
func CLICommand() *cli.Command {
	common := func(extra ...cli.Flag) []cli.Flag {
		return append([]cli.Flag{
			&cli.StringFlag{Name: flagRedisURL, Usage: "Redis URL (credentials in it are never printed)", EnvVars: []string{"CONNECT_KINESIS_REDIS_URL"}, Required: true},
			&cli.StringFlag{Name: flagRedisKind, Usage: "simple, cluster or failover", Value: KindSimple},
			&cli.StringFlag{Name: flagRedisMaster, Usage: "Sentinel master name (with --redis-kind failover)"},
			&cli.StringFlag{Name: flagRedisCAFile, Usage: "PEM file of CAs to trust for a rediss:// URL"},
			&cli.BoolFlag{Name: flagRedisSkipCheck, Usage: "do not verify the Redis server's certificate"},
			&cli.StringFlag{Name: flagGroup, Usage: "the consumer group (checkpoint.group)", Required: true},
			&cli.StringFlag{Name: flagKeyPrefix, Usage: "checkpoint.key_prefix", Value: DefaultKeyPrefix},
			&cli.StringFlag{Name: flagStream, Usage: "the stream name or ARN", Required: true},
			&cli.StringFlag{Name: flagStreamID, Usage: "skip the Kinesis lookup and use this key identity (the stream ARN); for a deleted stream"},
			&cli.StringFlag{Name: flagRegion, Usage: "AWS region (default: the SDK's chain)"},
			&cli.StringFlag{Name: flagEndpoint, Usage: "Kinesis endpoint URL, e.g. an emulator"},
			&cli.StringFlag{Name: flagProfile, Usage: "AWS shared-config profile (default: the SDK's chain)"},
			&cli.DurationFlag{Name: flagLeasePeriod, Usage: "lease.period of the pipelines, to judge which members are live", Value: DefaultLeasePeriod},
		}, extra...)
	}
	return &cli.Command{
		Name:  "checkpoints",
		Usage: "Inspect, reset or delete a consumer group's Kinesis checkpoints in Redis",
		Description: "Works on the keys <key-prefix>:{<group>:<stream ARN>}:ckpt|closed|lease|members|handoff.\n" +
			"See docs/checkpointer.md.",
		Subcommands: []*cli.Command{
			{
				Name:   "show",
				Usage:  "Print each shard's state, lease and checkpoint, and the live members",
				Flags:  common(&cli.BoolFlag{Name: flagJSON, Usage: "print JSON"}),
				Action: runShow,
			},
			{
				Name:  "reset",
				Usage: "Move the group to a new start: trim_horizon, latest, at_timestamp=RFC3339 or sequences=FILE",
				Flags: common(
					&cli.StringFlag{Name: flagTo, Usage: "trim_horizon | latest | at_timestamp=<RFC3339> | sequences=<FILE> (JSON: {\"shardId\": \"<seq>[/<sub>]\"|\"SHARD_END\"} or `show --json` output)", Required: true},
					&cli.BoolFlag{Name: flagForce, Usage: "reset even while pipelines hold live leases (they are fenced out)"},
				),
				Action: runReset,
			},
			{
				Name:  "delete",
				Usage: "Delete every key of the group on the stream",
				Flags: common(
					&cli.BoolFlag{Name: flagYes, Usage: "confirm the deletion"},
					&cli.BoolFlag{Name: flagForce, Usage: "delete even while pipelines hold live leases"},
				),
				Action: runDelete,
			},
		},
	}
}

// opened is what every subcommand starts from.
type opened struct {
	cp     *Checkpointer
	store  *Store
	stream streamInfo
	// listed is false with --stream-id: the shards are unknown.
	listed bool
}

func openFromFlags(c *cli.Context) (*opened, error) {
	ctx := c.Context
	cfg := DefaultConfig()
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
				return nil, fmt.Errorf("flag --%s: %w", flagRedisCAFile, err)
			}
			t.RootCAs = x509.NewCertPool()
			if !t.RootCAs.AppendCertsFromPEM(pem) {
				return nil, fmt.Errorf("flag --%s: no PEM certificate in %s", flagRedisCAFile, caFile)
			}
		}
		cfg.TLS = t
	}
	if err := cfg.Validate(); err != nil {
		return nil, flagError(err)
	}

	o := &opened{}
	if id := c.String(flagStreamID); id != "" {
		o.stream = streamInfo{ID: id, Name: c.String(flagStream)}
	} else {
		settings := awsconf.Settings{Region: c.String(flagRegion), Endpoint: c.String(flagEndpoint), Profile: c.String(flagProfile)}
		awsCfg, err := settings.Load(ctx)
		if err != nil {
			return nil, err
		}
		info, err := describeStream(ctx, settings.KinesisClient(awsCfg), c.String(flagStream))
		if err != nil {
			if errors.Is(err, ErrStreamNotFound) {
				return nil, fmt.Errorf("stream %q not found in region %s (check --stream, --region and --endpoint)", c.String(flagStream), regionOf(awsCfg))
			}
			return nil, err
		}
		o.stream, o.listed = info, true
	}

	cp, err := New(ctx, cfg, nil, nil)
	if err != nil {
		return nil, err
	}
	o.cp, o.store = cp, cp.Stream(o.stream.ID)
	return o, nil
}

func regionOf(cfg aws.Config) string { return cfg.Region }

// flagError turns a config field name into the flag that sets it.
func flagError(err error) error {
	msg := err.Error()
	for field, flag := range map[string]string{
		fieldPathRedisURL: flagRedisURL, fieldPathRedisKind: flagRedisKind, fieldPathRedisMaster: flagRedisMaster,
		fieldPathGroup: flagGroup, fieldPathKeyPrefix: flagKeyPrefix, fieldPathLeasePeriod: flagLeasePeriod,
	} {
		msg = strings.ReplaceAll(msg, "field "+field, "flag --"+flag)
	}
	return errors.New(msg)
}

// ShardRow is one line of `show`.
type ShardRow struct {
	Shard          string   `json:"shard"`
	State          string   `json:"state"`
	Parents        []string `json:"parents,omitempty"`
	Owner          string   `json:"owner,omitempty"`
	LeaseExpiresIn string   `json:"lease_expires_in,omitempty"`
	Token          int64    `json:"fencing_token,omitempty"`
	Checkpoint     string   `json:"checkpoint,omitempty"`
	HandoffTo      string   `json:"handoff_requested_by,omitempty"`
}

// ShowReport is the `show --json` document; `reset --to sequences=FILE`
// reads it back.
type ShowReport struct {
	Stream        string     `json:"stream"`
	StreamID      string     `json:"stream_id"`
	Group         string     `json:"group"`
	Keys          Keys       `json:"keys"`
	StartOverride string     `json:"start_override,omitempty"`
	Shards        []ShardRow `json:"shards"`
	LiveMembers   []string   `json:"live_members"`
}

func runShow(c *cli.Context) error {
	o, err := openFromFlags(c)
	if err != nil {
		return err
	}
	defer o.cp.Close()
	rep, err := buildShow(c.Context, o)
	if err != nil {
		return err
	}
	w := c.App.Writer
	if c.Bool(flagJSON) {
		enc := json.NewEncoder(w)
		enc.SetIndent("", "  ")
		return enc.Encode(rep)
	}
	printShow(w, rep)
	return nil
}

func buildShow(ctx context.Context, o *opened) (ShowReport, error) {
	s := o.store
	rep := ShowReport{Stream: o.stream.Name, StreamID: o.stream.ID, Group: o.cp.cfg.Group, Keys: s.keys}
	ckpts, err := s.Checkpoints(ctx)
	if err != nil {
		return rep, err
	}
	closed, err := s.ClosedShards(ctx)
	if err != nil {
		return rep, err
	}
	leases, err := s.Leases(ctx)
	if err != nil {
		return rep, err
	}
	handoff, err := s.c.client.HGetAll(ctx, s.keys.Handoff).Result()
	if err != nil {
		return rep, fmt.Errorf("reading hand-off requests: %w", err)
	}
	if rep.LiveMembers, err = s.LiveMembersReadOnly(ctx); err != nil {
		return rep, err
	}
	if so, ok, err := s.StartOverride(ctx); err != nil {
		return rep, err
	} else if ok {
		rep.StartOverride = so.String()
	}

	listed := map[string]bool{}
	for _, sh := range o.stream.Shards {
		listed[*sh.ShardId] = true
	}
	row := func(id string) ShardRow {
		r := ShardRow{Shard: id}
		if p, ok := ckpts[id]; ok {
			r.Checkpoint = p.String()
		}
		if l, ok := leases[id]; ok {
			r.Token = l.Token
			if !l.Expired {
				r.Owner = l.Owner
				r.LeaseExpiresIn = l.ExpiresIn.Round(100 * time.Millisecond).String()
			}
		}
		if v, ok := handoff[id]; ok {
			r.HandoffTo, _, _ = strings.Cut(v, "|")
		}
		return r
	}
	for _, sh := range o.stream.Shards {
		r := row(*sh.ShardId)
		for _, p := range []*string{sh.ParentShardId, sh.AdjacentParentShardId} {
			if p != nil && *p != "" {
				r.Parents = append(r.Parents, *p)
			}
		}
		r.State = shardState(r, closed, listed)
		rep.Shards = append(rep.Shards, r)
	}
	// Shards Redis knows that the stream no longer lists (trimmed past
	// retention, or every shard with --stream-id).
	extra := map[string]bool{}
	for id := range ckpts {
		extra[id] = true
	}
	for id := range closed {
		extra[id] = true
	}
	for id := range leases {
		extra[id] = true
	}
	var ids []string
	for id := range extra {
		if !listed[id] {
			ids = append(ids, id)
		}
	}
	sort.Strings(ids)
	for _, id := range ids {
		r := row(id)
		switch {
		case !o.listed && closed[id]:
			r.State = StateClosed
		case !o.listed && r.Owner != "":
			r.State = StateOpen
		case !o.listed:
			r.State = StateReady
		default:
			r.State = StateTrimmed
		}
		rep.Shards = append(rep.Shards, r)
	}
	return rep, nil
}

// shardState follows the input's gate: a shard is read once every parent is
// closed, and a parent the stream no longer lists counts as closed.
func shardState(r ShardRow, closed, listed map[string]bool) string {
	if closed[r.Shard] {
		return StateClosed
	}
	for _, p := range r.Parents {
		if listed[p] && !closed[p] {
			return StateWaitingForParents
		}
	}
	if r.Owner != "" {
		return StateOpen
	}
	return StateReady
}

func printShow(w io.Writer, rep ShowReport) {
	fmt.Fprintf(w, "stream: %s\nkey identity: %s\ngroup: %s\n", rep.Stream, rep.StreamID, rep.Group)
	if rep.StartOverride != "" {
		fmt.Fprintf(w, "start override (from a reset): %s\n", rep.StartOverride)
	}
	fmt.Fprintln(w)
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "SHARD\tSTATE\tPARENTS\tOWNER\tEXPIRES IN\tTOKEN\tCHECKPOINT\tHAND-OFF TO")
	dash := func(s string) string {
		if s == "" {
			return "-"
		}
		return s
	}
	for _, r := range rep.Shards {
		token := "-"
		if r.Token > 0 {
			token = fmt.Sprint(r.Token)
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\n", r.Shard, r.State, dash(strings.Join(r.Parents, ",")),
			dash(r.Owner), dash(r.LeaseExpiresIn), token, dash(r.Checkpoint), dash(r.HandoffTo))
	}
	_ = tw.Flush()
	fmt.Fprintf(w, "\nlive members (%d):\n", len(rep.LiveMembers))
	for _, m := range rep.LiveMembers {
		fmt.Fprintf(w, "  %s\n", m)
	}
}

func runReset(c *cli.Context) error {
	to := c.String(flagTo)
	var start *consumer.StartOverride
	var positions map[string]consumer.Position
	if file, ok := strings.CutPrefix(to, "sequences="); ok {
		var err error
		if positions, err = readSequencesFile(file); err != nil {
			return fmt.Errorf("flag --%s: %w", flagTo, err)
		}
	} else {
		so, err := consumer.ParseStartOverride(to)
		if err != nil {
			return fmt.Errorf("flag --%s: %w (or sequences=<FILE>)", flagTo, err)
		}
		start = &so
	}
	o, err := openFromFlags(c)
	if err != nil {
		return err
	}
	defer o.cp.Close()
	w := c.App.Writer
	if o.listed && positions != nil {
		listed := map[string]bool{}
		for _, sh := range o.stream.Shards {
			listed[*sh.ShardId] = true
		}
		for shard := range positions {
			if !listed[shard] {
				fmt.Fprintf(w, "warning: %s is not a shard the stream lists (trimmed?); its checkpoint is written anyway\n", shard)
			}
		}
	}
	res, err := o.store.Reset(c.Context, start, positions, c.Bool(flagForce))
	if err != nil {
		return err
	}
	fmt.Fprintf(w, "reset group %s on %s:\n", o.cp.cfg.Group, o.stream.ID)
	printChanges(w, res, positions)
	if start != nil {
		fmt.Fprintf(w, "shards without a checkpoint now start at: %s\n", start)
	} else {
		fmt.Fprintln(w, "shards without a checkpoint start at the pipelines' start_position")
	}
	return nil
}

func printChanges(w io.Writer, res ResetResult, positions map[string]consumer.Position) {
	shards := map[string]bool{}
	for s := range res.Checkpoints {
		shards[s] = true
	}
	for s := range positions {
		shards[s] = true
	}
	ids := make([]string, 0, len(shards))
	for s := range shards {
		ids = append(ids, s)
	}
	sort.Strings(ids)
	if len(ids) == 0 {
		fmt.Fprintln(w, "  no checkpoints before or after")
	}
	for _, s := range ids {
		before, after := "(none)", "(none)"
		if p, ok := res.Checkpoints[s]; ok {
			before = p.String()
		}
		if p, ok := positions[s]; ok {
			after = p.String()
		}
		fmt.Fprintf(w, "  %s: %s -> %s\n", s, before, after)
	}
	fmt.Fprintf(w, "  closed shards cleared: %d\n", len(res.Closed))
	if len(res.LiveLeases) > 0 {
		fmt.Fprintf(w, "  leases fenced out (forced): %s\n", strings.Join(res.LiveLeases, ", "))
	}
}

// readSequencesFile reads {"shardId": "<seq>[/<sub>]"|"SHARD_END"} or the
// document `show --json` prints.
func readSequencesFile(path string) (map[string]consumer.Position, error) {
	raw, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("reading sequences file: %w", err)
	}
	var show ShowReport
	if err := json.Unmarshal(raw, &show); err == nil && show.Shards != nil {
		out := map[string]consumer.Position{}
		for _, r := range show.Shards {
			if r.Checkpoint == "" {
				continue
			}
			p, err := consumer.ParsePosition(r.Checkpoint)
			if err != nil {
				return nil, fmt.Errorf("sequences file %s, shard %s: %w", path, r.Shard, err)
			}
			out[r.Shard] = p
		}
		return out, nil
	}
	var flat map[string]string
	if err := json.Unmarshal(raw, &flat); err != nil {
		return nil, fmt.Errorf("sequences file %s: want a JSON object of shard id to \"<sequence>[/<sub>]\" or \"SHARD_END\", or `show --json` output: %w", path, err)
	}
	out := make(map[string]consumer.Position, len(flat))
	for shard, v := range flat {
		p, err := consumer.ParsePosition(v)
		if err != nil {
			return nil, fmt.Errorf("sequences file %s, shard %s: %w", path, shard, err)
		}
		out[shard] = p
	}
	return out, nil
}

func runDelete(c *cli.Context) error {
	if !c.Bool(flagYes) {
		return fmt.Errorf("flag --%s: delete removes every checkpoint of the group; pass --%s to confirm", flagYes, flagYes)
	}
	o, err := openFromFlags(c)
	if err != nil {
		return err
	}
	defer o.cp.Close()
	res, err := o.store.Delete(c.Context, c.Bool(flagForce))
	if err != nil {
		return err
	}
	w := c.App.Writer
	fmt.Fprintf(w, "deleted group %s on %s: %d checkpoints, %d closed shards\n", o.cp.cfg.Group, o.stream.ID, len(res.Checkpoints), len(res.Closed))
	ids := make([]string, 0, len(res.Checkpoints))
	for s := range res.Checkpoints {
		ids = append(ids, s)
	}
	sort.Strings(ids)
	for _, s := range ids {
		fmt.Fprintf(w, "  %s: %s -> (none)\n", s, res.Checkpoints[s])
	}
	if len(res.LiveLeases) > 0 {
		fmt.Fprintf(w, "  leases removed while live (forced): %s\n", strings.Join(res.LiveLeases, ", "))
	}
	return nil
}
