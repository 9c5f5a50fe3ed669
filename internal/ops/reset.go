package ops

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"maps"
	"os"
	"slices"
	"strings"

	"github.com/urfave/cli/v2"

	"github.com/connect-kinesis/connect-kinesis/internal/consumer"
	"github.com/connect-kinesis/connect-kinesis/plugins/checkpointer"
)

func runReset(c *cli.Context) error {
	to := c.String(flagTo)
	if file, ok := strings.CutPrefix(to, "sequences="); ok {
		if set, ok, err := readExportSet(file); err != nil {
			return fmt.Errorf("flag --%s: %w", flagTo, err)
		} else if ok {
			return resetFromSet(c, file, set)
		}
		st, err := readSequencesFile(file)
		if err != nil {
			return fmt.Errorf("flag --%s: %w", flagTo, err)
		}
		o, err := openFromFlags(c)
		if err != nil {
			return err
		}
		defer o.cp.Close()
		if err := resetStream(c, o, st); err != nil {
			return err
		}
		return confirmHint(c, o.cp.Config().Group, "stream "+o.stream.Name)
	}
	so, err := consumer.ParseStartOverride(to)
	if err != nil {
		return fmt.Errorf("flag --%s: %w (or sequences=<FILE>)", flagTo, err)
	}
	o, err := openFromFlags(c)
	if err != nil {
		return err
	}
	defer o.cp.Close()
	if err := resetStream(c, o, exportedState{start: &so}); err != nil {
		return err
	}
	return confirmHint(c, o.cp.Config().Group, "stream "+o.stream.Name)
}

// confirmHint is the error of a reset without --yes: what it would change
// is printed, nothing written.
func confirmHint(c *cli.Context, group, what string) error {
	if c.Bool(flagYes) {
		return nil
	}
	return fmt.Errorf("flag --%s: reset replaces every checkpoint of group %s on %s (what it would change is printed above; nothing was written); pass --%s to confirm",
		flagYes, group, what, flagYes)
}

// readExportSet reads path as the document a whole-group or pattern export
// writes, saying whether it is one.
func readExportSet(path string) (ExportSet, bool, error) {
	raw, err := os.ReadFile(path)
	if err != nil {
		return ExportSet{}, false, fmt.Errorf("reading sequences file: %w", err)
	}
	var set ExportSet
	if err := json.Unmarshal(raw, &set); err != nil || set.Format != exportSetFormat {
		return ExportSet{}, false, nil
	}
	return set, true, nil
}

// resetFromSet restores the streams of a set export: the one --stream
// names (by name or ARN), or every stream in the file. Each stream is
// checked and previewed as a reset of one stream is; with --yes each is
// written in turn, and a failure stops at that stream, naming it.
func resetFromSet(c *cli.Context, file string, set ExportSet) error {
	docs := set.Streams
	if want := c.String(flagStream); want != "" {
		docs = nil
		for _, d := range set.Streams {
			if d.Stream == want || d.StreamID == want {
				docs = append(docs, d)
			}
		}
		if len(docs) == 0 {
			var names []string
			for _, d := range set.Streams {
				names = append(names, d.Stream)
			}
			return fmt.Errorf("flag --%s: %s holds no stream %q; it holds: %s", flagStream, file, want, strings.Join(names, ", "))
		}
	}
	if len(docs) == 0 {
		return fmt.Errorf("flag --%s: %s holds no stream", flagTo, file)
	}
	if c.String(flagStreamID) != "" {
		return fmt.Errorf("flag --%s: a set export names its streams' ids itself; pick one with --%s", flagStreamID, flagStream)
	}
	var names []string
	for _, d := range docs {
		st, err := d.state()
		if err != nil {
			return fmt.Errorf("flag --%s: %s, stream %s: %w", flagTo, file, d.Stream, err)
		}
		st.origin = fileOrigin{streamID: d.StreamID, group: d.Group}
		// The stream's ARN names it in Kinesis, so the file's checks (its
		// shards, its positions) run as for one stream.
		o, err := openStream(c, d.StreamID, "")
		if err != nil {
			return fmt.Errorf("stream %s of %s: %w", d.Stream, file, err)
		}
		err = resetStream(c, o, st)
		o.cp.Close()
		if err != nil {
			return fmt.Errorf("stream %s of %s: %w", d.Stream, file, err)
		}
		names = append(names, d.Stream)
	}
	return confirmHint(c, set.Group, fmt.Sprintf("%d streams (%s)", len(names), strings.Join(names, ", ")))
}

// resetStream resets one opened stream to st, or without --yes prints what
// it would change.
func resetStream(c *cli.Context, o *opened, st exportedState) error {
	positions, start, starts, origin, delivered := st.positions, st.start, st.starts, st.origin, st.delivered
	w := c.App.Writer
	if positions != nil {
		if err := checkOrigin(origin, o.stream.ID, o.cp.Config().Group, c.Bool(flagAllowOtherOrigin)); err != nil {
			return err
		}
	}
	if o.listed && positions != nil {
		listed := o.stream.listed()
		for _, shard := range slices.Sorted(maps.Keys(positions)) {
			if !listed[shard] {
				fmt.Fprintf(w, "warning: %s is not a shard the stream lists (trimmed?); its checkpoint is written anyway\n", shard)
			}
		}
		foreign, err := foreignPositions(c.Context, o.api, o.stream, positions)
		if err != nil {
			return err
		}
		if len(foreign) > 0 {
			return fmt.Errorf("the file's positions of %d shards are not records of stream %s, so a reader would stall on them; "+
				"is the file of another stream (check --%s)? nothing was written\n  %s",
				len(foreign), o.stream.Name, flagStream, strings.Join(foreign, "\n  "))
		}
	}
	if !c.Bool(flagYes) {
		return previewReset(c.Context, w, o, start, positions, starts)
	}
	res, err := o.store.Reset(c.Context, start, positions, starts, c.Bool(flagForce))
	if err != nil {
		return err
	}
	fmt.Fprintf(w, "reset group %s on %s:\n", o.cp.Config().Group, o.stream.ID)
	printChanges(w, res, positions)
	if len(delivered) > 0 {
		// A reset keeps the redelivery marks; an export's are written back
		// only forwards, so records read again stay marked.
		n, err := o.store.RestoreDelivered(c.Context, delivered)
		if err != nil {
			return err
		}
		fmt.Fprintf(w, "redelivery marks: %d of the file's %d moved forwards (a mark never moves back)\n", n, len(delivered))
	}
	for _, shard := range slices.Sorted(maps.Keys(starts)) {
		fmt.Fprintf(w, "  %s starts at %s while it has no checkpoint\n", shard, starts[shard])
	}
	if res.Start != nil {
		fmt.Fprintf(w, "shards without a checkpoint now start at: %s\n", res.Start)
	} else {
		fmt.Fprintln(w, "shards without a checkpoint start at the pipelines' start_position")
	}
	return nil
}

// previewReset prints what a reset would change, writing nothing: every
// checkpoint before and after, the closed shards cleared, the live leases
// it would refuse for (or fence out with --force), and the new start.
func previewReset(ctx context.Context, w io.Writer, o *opened, start *consumer.StartOverride, positions map[string]consumer.Position, starts map[string]consumer.StartOverride) error {
	var res checkpointer.ResetResult
	var err error
	if res.Checkpoints, err = o.store.Checkpoints(ctx); err != nil {
		return err
	}
	if res.Closed, err = o.store.ClosedShards(ctx); err != nil {
		return err
	}
	leases, err := o.store.Leases(ctx)
	if err != nil {
		return err
	}
	var live []string
	for id, l := range leases {
		if !l.Expired && l.Owner != "" {
			live = append(live, id)
		}
	}
	slices.Sort(live)
	fmt.Fprintf(w, "reset of group %s on %s would change (nothing is written without --%s):\n", o.cp.Config().Group, o.stream.ID, flagYes)
	printChanges(w, res, positions)
	if len(live) > 0 {
		fmt.Fprintf(w, "  live leases (refused without --%s, fenced out with it): %s\n", flagForce, strings.Join(live, ", "))
	}
	for _, shard := range slices.Sorted(maps.Keys(starts)) {
		fmt.Fprintf(w, "  %s would start at %s while it has no checkpoint\n", shard, starts[shard])
	}
	switch {
	case start != nil && start.Mode == consumer.StartLatest:
		fmt.Fprintln(w, "shards without a checkpoint would start at the time of the reset (latest)")
	case start != nil:
		fmt.Fprintf(w, "shards without a checkpoint would start at: %s\n", start)
	default:
		fmt.Fprintln(w, "shards without a checkpoint would start at the pipelines' start_position")
	}
	return nil
}

func printChanges(w io.Writer, res checkpointer.ResetResult, positions map[string]consumer.Position) {
	ids := slices.AppendSeq(slices.Collect(maps.Keys(res.Checkpoints)), maps.Keys(positions))
	slices.Sort(ids)
	ids = slices.Compact(ids)
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

// flagAllowOtherOrigin lets `reset --to sequences=FILE` restore a file
// written for another stream or group.
const flagAllowOtherOrigin = "allow-other-origin"

// fileOrigin is the stream and group a sequences file was written for, as
// an export or `show --json` records them (empty for a flat file).
type fileOrigin struct{ streamID, group string }

// checkOrigin refuses a file written for another stream or group: shard ids
// are the same in every stream, so nothing else tells that the file's
// positions are not this stream's, and a group's checkpoints copied to
// another group is rarely what was meant.
func checkOrigin(origin fileOrigin, streamID, group string, allow bool) error {
	var diffs []string
	if origin.streamID != "" && origin.streamID != streamID {
		diffs = append(diffs, fmt.Sprintf("stream %s, not %s", origin.streamID, streamID))
	}
	if origin.group != "" && origin.group != group {
		diffs = append(diffs, fmt.Sprintf("group %s, not %s", origin.group, group))
	}
	if len(diffs) == 0 || allow {
		return nil
	}
	return fmt.Errorf("flag --%s: the file was written for %s; check --%s and --%s, or pass --%s to restore it all the same",
		flagTo, strings.Join(diffs, " and "), flagStream, flagGroup, flagAllowOtherOrigin)
}

// readSequencesFile reads {"shardId": "<seq>[/<sub>]"|"SHARD_END"}, the
// document `show --json` prints, or an export (which may also hold a start
// override and per-shard starts).
func readSequencesFile(path string) (exportedState, error) {
	raw, err := os.ReadFile(path)
	if err != nil {
		return exportedState{}, fmt.Errorf("reading sequences file: %w", err)
	}
	var export ExportDocument
	if err := json.Unmarshal(raw, &export); err == nil && export.Format == exportFormat {
		st, err := export.state()
		if err != nil {
			return exportedState{}, fmt.Errorf("sequences file %s: %w", path, err)
		}
		st.origin = fileOrigin{streamID: export.StreamID, group: export.Group}
		return st, nil
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
				return exportedState{}, fmt.Errorf("sequences file %s, shard %s: %w", path, r.Shard, err)
			}
			out[r.Shard] = p
		}
		return exportedState{positions: out, origin: fileOrigin{streamID: show.StreamID, group: show.Group}}, nil
	}
	var flat map[string]string
	if err := json.Unmarshal(raw, &flat); err != nil {
		return exportedState{}, fmt.Errorf("sequences file %s: want a JSON object of shard id to \"<sequence>[/<sub>]\" or \"SHARD_END\", `show --json` output or an export: %w", path, err)
	}
	out := make(map[string]consumer.Position, len(flat))
	for shard, v := range flat {
		p, err := consumer.ParsePosition(v)
		if err != nil {
			return exportedState{}, fmt.Errorf("sequences file %s, shard %s: %w", path, shard, err)
		}
		out[shard] = p
	}
	return exportedState{positions: out}, nil
}
