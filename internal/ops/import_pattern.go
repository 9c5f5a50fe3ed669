package ops

import (
	"context"
	"fmt"
	"slices"
	"strconv"
	"strings"

	"github.com/urfave/cli/v2"

	"github.com/connect-kinesis/connect-kinesis/internal/awsconf"
	"github.com/connect-kinesis/connect-kinesis/internal/streams"
	"github.com/connect-kinesis/connect-kinesis/plugins/checkpointer"
)

// runImportPattern imports every stream of the account and region whose
// name matches --stream (a pattern) and that the source holds checkpoints
// of, one after the other, each exactly as `import --stream NAME` would
// (same checks, same refusals). The source's key of each stream is found
// from the stream (a KCL multi-stream table's <account>:<name>:<epoch>
// included), so --source-stream cannot be given. The first stream that
// fails stops the import; the streams before it are imported, and the
// output says which.
func runImportPattern(c *cli.Context, from, table string) error {
	pattern := c.String(flagStream)
	switch {
	case c.String(flagSourceStream) != "":
		return fmt.Errorf("flag --%s: with a pattern as --%s each stream's source key is found from the stream; import one stream at a time to name it", flagSourceStream, flagStream)
	case c.String(flagStreamID) != "":
		return fmt.Errorf("flag --%s: name one stream with --%s (not a pattern) to use it", flagStreamID, flagStream)
	}
	rules, err := streams.ParseRules([]string{pattern}, nil)
	if err != nil {
		return fmt.Errorf("flag --%s: %w", flagStream, err)
	}
	ctx := c.Context
	cfg, err := checkpointerConfig(c)
	if err != nil {
		return err
	}
	settings := awsconf.Settings{Region: c.String(flagRegion), Endpoint: c.String(flagEndpoint), Profile: c.String(flagProfile)}
	awsCfg, err := settings.Load(ctx)
	if err != nil {
		return flagError(err)
	}
	api := settings.KinesisClient(awsCfg)
	found, err := streams.NewLister(api, operatorBackoff).List(ctx, rules)
	if err != nil {
		return err
	}
	if len(found) == 0 {
		return fmt.Errorf("flag --%s: no stream of region %s matches %s", flagStream, awsCfg.Region, pattern)
	}
	items, err := scanSourceTable(c, table)
	if err != nil {
		return err
	}
	holds, err := sourceStreams(from, table, items)
	if err != nil {
		return err
	}
	cp, err := checkpointer.New(ctx, cfg, nil, nil)
	if err != nil {
		return flagError(err)
	}
	defer cp.Close()
	w := c.App.Writer
	var done []string
	for _, id := range found {
		if !id.Readable() {
			fmt.Fprintf(w, "skipping %s: the stream is %s\n", id.Name, id.Status)
			continue
		}
		info, err := describeStream(ctx, api, id.Name)
		if err != nil {
			return importStopped(done, id.Name, err)
		}
		if ok, former := holds(info); !ok {
			if len(former) > 0 {
				fmt.Fprintf(w, "skipping %s: table %s holds nothing of it, only leases of a deleted stream of that name (%s; import one with --%s %s --%s <identifier> if it is this stream's)\n",
					id.Name, table, strings.Join(former, ", "), flagStream, id.Name, flagSourceStream)
			} else {
				fmt.Fprintf(w, "skipping %s: table %s holds nothing of it\n", id.Name, table)
			}
			continue
		}
		name := id.Name
		o := &opened{cp: cp, store: cp.Stream(info.ID), stream: info, listed: true, api: api,
			relist: func(ctx context.Context) (streamInfo, error) { return describeStream(ctx, api, name) }}
		if err := importStream(c, o, from, table, items, ""); err != nil {
			return importStopped(done, id.Name, err)
		}
		done = append(done, id.Name)
	}
	fmt.Fprintf(w, "imported %d streams matching %s: %v\n", len(done), pattern, done)
	return nil
}

// importStopped names what a pattern import did before a stream failed.
func importStopped(done []string, stream string, err error) error {
	return fmt.Errorf("importing stream %s (imported before it: %v; the rest not): %w", stream, done, err)
}

// sourceStreams tells which streams the source table holds checkpoints of:
// a Connect table by StreamID (a name or an ARN), a KCL table by the
// multi-stream identifiers <account>:<name>:<epoch> of its leases. A
// single-stream KCL table names no stream (its leases are shard ids that
// every stream has), so a pattern cannot pick streams from it.
func sourceStreams(from, table string, items []item) (func(streamInfo) (ok bool, former []string), error) {
	held := map[string]bool{}
	if from == SourceConnect {
		for _, it := range items {
			held[attrS(it, connectAttrStream)] = true
		}
		return func(s streamInfo) (bool, []string) { return held[s.Name] || held[s.ID], nil }, nil
	}
	idents := map[string][]string{}
	single := false
	for _, it := range items {
		l, skip := splitKCLLease(it)
		switch {
		case skip != "":
		case l.stream == "":
			single = true
		default:
			account, name, epoch := kclStreamParts(l.stream)
			for _, key := range []string{account + ":" + name, ":" + name} {
				if !held[key+":"+epoch] {
					idents[key] = append(idents[key], l.stream)
				}
				held[key] = true
				held[key+":"+epoch] = true
			}
		}
	}
	if single {
		return nil, fmt.Errorf("flag --%s: table %s is a single-stream KCL lease table (its leases name no stream), so a pattern cannot tell which stream each belongs to; import it with --%s NAME", flagStream, table, flagStream)
	}
	return func(s streamInfo) (bool, []string) {
		key := ":" + s.Name
		if s.account() != "" {
			key = s.account() + key
		}
		if s.Created.IsZero() {
			return held[key], nil
		}
		// An identifier carries its stream's creation time: the leases of a
		// deleted stream of the same name (the KCL keeps a former stream's
		// leases by default) hold nothing of the stream listed now.
		if held[key+":"+strconv.FormatInt(s.Created.Unix(), 10)] {
			return true, nil
		}
		return false, slices.Sorted(slices.Values(idents[key]))
	}, nil
}
