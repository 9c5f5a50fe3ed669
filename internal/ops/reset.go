package ops

import (
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
	var start *consumer.StartOverride
	var positions map[string]consumer.Position
	var starts map[string]consumer.StartOverride
	if file, ok := strings.CutPrefix(to, "sequences="); ok {
		st, err := readSequencesFile(file)
		if err != nil {
			return fmt.Errorf("flag --%s: %w", flagTo, err)
		}
		positions, start, starts = st.positions, st.start, st.starts
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
		listed := o.stream.listed()
		for _, shard := range slices.Sorted(maps.Keys(positions)) {
			if !listed[shard] {
				fmt.Fprintf(w, "warning: %s is not a shard the stream lists (trimmed?); its checkpoint is written anyway\n", shard)
			}
		}
	}
	res, err := o.store.Reset(c.Context, start, positions, starts, c.Bool(flagForce))
	if err != nil {
		return err
	}
	fmt.Fprintf(w, "reset group %s on %s:\n", o.cp.Config().Group, o.stream.ID)
	printChanges(w, res, positions)
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
		return exportedState{positions: out}, nil
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
