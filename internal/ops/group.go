package ops

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"text/tabwriter"
	"time"

	"github.com/urfave/cli/v2"

	"github.com/connect-kinesis/connect-kinesis/internal/kinesisx"
	"github.com/connect-kinesis/connect-kinesis/internal/streams"
	"github.com/connect-kinesis/connect-kinesis/plugins/checkpointer"
)

// The group's streams: `show` without --stream (or with a pattern) and
// `export` with a pattern. Both read Redis only: the streams are those the
// group has keys for (SCAN), with what its stream discovery found, so a
// deleted stream whose keys are kept shows too.

// GroupStreamRow is one stream of `show --group G` without --stream.
type GroupStreamRow struct {
	Stream      string   `json:"stream"`
	StreamID    string   `json:"stream_id"`
	Checkpoints int      `json:"checkpoints"`
	Closed      int      `json:"closed"`
	LiveLeases  int      `json:"live_leases"`
	LiveMembers []string `json:"live_members"`
	// Discovery is set for streams the group's discovery lists or listed.
	Discovery *StreamDiscoveryRow `json:"discovery,omitempty"`
}

// StreamDiscoveryRow is what the group's discovery says of a stream.
type StreamDiscoveryRow struct {
	Created  time.Time  `json:"created"`
	Status   string     `json:"status"`
	Seen     time.Time  `json:"seen"`
	GoneAt   *time.Time `json:"gone_at,omitempty"`
	Appeared bool       `json:"appeared"`
}

// GroupReport is the `show --group G --json` document without --stream.
type GroupReport struct {
	Group   string           `json:"group"`
	Pattern string           `json:"pattern,omitempty"`
	Streams []GroupStreamRow `json:"streams"`
	// ListedAt is the discovery's last listing (absent: none).
	ListedAt *time.Time `json:"discovery_listed_at,omitempty"`
	At       time.Time  `json:"at"`
}

// openGroup connects to Redis for a command over the group's streams.
func openGroup(c *cli.Context) (*checkpointer.Checkpointer, streams.Rules, error) {
	cfg, err := checkpointerConfig(c)
	if err != nil {
		return nil, streams.Rules{}, err
	}
	if c.String(flagStreamID) != "" {
		return nil, streams.Rules{}, fmt.Errorf("flag --%s: name one stream with --%s (not a pattern) to use it", flagStreamID, flagStream)
	}
	var rules streams.Rules
	if p := c.String(flagStream); p != "" {
		if rules, err = streams.ParseRules([]string{p}, nil); err != nil {
			return nil, rules, fmt.Errorf("flag --%s: %w", flagStream, err)
		}
	}
	cp, err := checkpointer.New(c.Context, cfg, nil, nil)
	if err != nil {
		return nil, rules, flagError(err)
	}
	return cp, rules, nil
}

// groupStreams returns the group's streams that match rules (all without
// a pattern), by key identity, with what discovery says of each.
func groupStreams(ctx context.Context, cp *checkpointer.Checkpointer, rules streams.Rules) ([]string, map[string]checkpointer.DiscoveredStream, checkpointer.Discovery, error) {
	ids, err := cp.GroupStreams(ctx)
	if err != nil {
		return nil, nil, checkpointer.Discovery{}, err
	}
	d, err := cp.ReadDiscovery(ctx)
	if err != nil {
		return nil, nil, d, err
	}
	found := map[string]checkpointer.DiscoveredStream{}
	seen := map[string]bool{}
	for _, id := range ids {
		seen[id] = true
	}
	for _, s := range d.Streams {
		found[s.Key()] = s
		if !seen[s.Key()] {
			ids = append(ids, s.Key())
			seen[s.Key()] = true
		}
	}
	var out []string
	for _, id := range ids {
		if !rules.Dynamic() || rules.MatchName(kinesisx.StreamName(id)) {
			out = append(out, id)
		}
	}
	return out, found, d, nil
}

func runShowGroup(c *cli.Context) error {
	cp, rules, err := openGroup(c)
	if err != nil {
		return err
	}
	defer cp.Close()
	rep, err := buildGroupReport(c.Context, cp, rules)
	if err != nil {
		return err
	}
	rep.Pattern = c.String(flagStream)
	if c.Bool(flagJSON) {
		enc := json.NewEncoder(c.App.Writer)
		enc.SetIndent("", "  ")
		return enc.Encode(rep)
	}
	printGroup(c.App.Writer, rep)
	// A misspelled group reads as an empty one: say what to check, and
	// what an empty group otherwise means.
	if len(rep.Streams) == 0 && rep.ListedAt == nil && rep.Pattern == "" {
		fmt.Fprintf(c.App.Writer, "this Redis holds nothing of group %s under key prefix %s: check --%s and --%s against the inputs' checkpoint.group and checkpoint.key_prefix, or the group's inputs have not started yet\n",
			rep.Group, cp.Config().KeyPrefix, flagGroup, flagKeyPrefix)
	}
	return nil
}

func buildGroupReport(ctx context.Context, cp *checkpointer.Checkpointer, rules streams.Rules) (GroupReport, error) {
	rep := GroupReport{Group: cp.Config().Group, Streams: []GroupStreamRow{}, At: time.Now()}
	ids, found, d, err := groupStreams(ctx, cp, rules)
	if err != nil {
		return rep, err
	}
	if !d.ListedAt.IsZero() {
		rep.ListedAt = &d.ListedAt
	}
	for _, id := range ids {
		s := cp.Stream(id)
		row := GroupStreamRow{Stream: kinesisx.StreamName(id), StreamID: id}
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
		if row.LiveMembers, err = s.LiveMembersReadOnly(ctx); err != nil {
			return rep, err
		}
		row.Checkpoints, row.Closed = len(ckpts), len(closed)
		for _, l := range leases {
			if !l.Expired && l.Owner != "" {
				row.LiveLeases++
			}
		}
		if f, ok := found[id]; ok {
			row.Discovery = &StreamDiscoveryRow{Created: f.Created, Status: string(f.Status), Seen: f.Seen, Appeared: f.Appeared}
			if !f.Gone.IsZero() {
				row.Discovery.GoneAt = &f.Gone
			}
		}
		rep.Streams = append(rep.Streams, row)
	}
	return rep, nil
}

func printGroup(w io.Writer, rep GroupReport) {
	fmt.Fprintf(w, "group %s: %d streams", rep.Group, len(rep.Streams))
	if rep.Pattern != "" {
		fmt.Fprintf(w, " matching %s", rep.Pattern)
	}
	if rep.ListedAt != nil {
		fmt.Fprintf(w, " (streams last listed %s)", rep.ListedAt.UTC().Format(time.RFC3339))
	}
	fmt.Fprintln(w)
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "STREAM\tCHECKPOINTS\tCLOSED\tLIVE LEASES\tMEMBERS\tDISCOVERY\tSTREAM ID")
	for _, r := range rep.Streams {
		disc := "-"
		if d := r.Discovery; d != nil {
			disc = "listed"
			if d.GoneAt != nil {
				disc = "gone since " + d.GoneAt.UTC().Format(time.RFC3339)
			}
		}
		fmt.Fprintf(tw, "%s\t%d\t%d\t%d\t%d\t%s\t%s\n", r.Stream, r.Checkpoints, r.Closed, r.LiveLeases, len(r.LiveMembers), disc, r.StreamID)
	}
	_ = tw.Flush()
}

// exportSetFormat marks a document `checkpoints export --stream PATTERN`
// wrote: one export document per stream.
const exportSetFormat = "connect-kinesis-checkpoints-set/v1"

// ExportSet is what `checkpoints export` writes for a pattern.
type ExportSet struct {
	Format     string           `json:"format"`
	Group      string           `json:"group"`
	Pattern    string           `json:"pattern"`
	ExportedAt time.Time        `json:"exported_at"`
	Streams    []ExportDocument `json:"streams"`
}

func runExportPattern(c *cli.Context) error {
	cp, rules, err := openGroup(c)
	if err != nil {
		return err
	}
	defer cp.Close()
	ctx := c.Context
	ids, _, _, err := groupStreams(ctx, cp, rules)
	if err != nil {
		return err
	}
	pattern := c.String(flagStream)
	if pattern == "" {
		pattern = "*"
	}
	set := ExportSet{Format: exportSetFormat, Group: cp.Config().Group, Pattern: pattern, ExportedAt: time.Now().UTC(), Streams: []ExportDocument{}}
	for _, id := range ids {
		doc, err := exportDocument(ctx, cp.Stream(id), kinesisx.StreamName(id), id, set.Group)
		if err != nil {
			return err
		}
		set.Streams = append(set.Streams, doc)
	}
	raw, err := json.MarshalIndent(set, "", "  ")
	if err != nil {
		return fmt.Errorf("encoding the export: %w", err)
	}
	raw = append(raw, '\n')
	path := c.String(flagOutput)
	if path == "" || path == "-" {
		_, err = c.App.Writer.Write(raw)
		return err
	}
	if err := os.WriteFile(path, raw, 0o600); err != nil {
		return fmt.Errorf("flag --%s: writing the export: %w", flagOutput, err)
	}
	fmt.Fprintf(c.App.ErrWriter, "exported %d streams of group %s matching %s to %s\n", len(set.Streams), set.Group, set.Pattern, path)
	return nil
}
