package ops

import (
	"encoding/json"
	"fmt"
	"maps"
	"os"
	"slices"
	"time"

	"github.com/urfave/cli/v2"

	"github.com/connect-kinesis/connect-kinesis/internal/consumer"
)

// exportFormat marks a document `checkpoints export` wrote.
const exportFormat = "connect-kinesis-checkpoints/v1"

// ExportDocument is what `checkpoints export` writes: everything a reset
// replaces (checkpoints, the closed set, the start override), so that
// `reset --to sequences=FILE` puts a group back where it was.
type ExportDocument struct {
	Format        string            `json:"format"`
	Stream        string            `json:"stream"`
	StreamID      string            `json:"stream_id"`
	Group         string            `json:"group"`
	ExportedAt    time.Time         `json:"exported_at"`
	StartOverride string            `json:"start_override,omitempty"`
	Checkpoints   map[string]string `json:"checkpoints"`
	Closed        []string          `json:"closed,omitempty"`
}

func runExport(c *cli.Context) error {
	o, err := openFromFlags(c)
	if err != nil {
		return err
	}
	defer o.cp.Close()
	ctx := c.Context
	ckpts, err := o.store.Checkpoints(ctx)
	if err != nil {
		return err
	}
	closed, err := o.store.ClosedShards(ctx)
	if err != nil {
		return err
	}
	doc := ExportDocument{
		Format: exportFormat, Stream: o.stream.Name, StreamID: o.stream.ID, Group: o.cp.Config().Group,
		ExportedAt: time.Now().UTC(), Checkpoints: make(map[string]string, len(ckpts)),
		Closed: slices.Sorted(maps.Keys(closed)),
	}
	for id, p := range ckpts {
		doc.Checkpoints[id] = p.String()
	}
	if so, ok, err := o.store.StartOverride(ctx); err != nil {
		return err
	} else if ok {
		doc.StartOverride = so.String()
	}
	raw, err := json.MarshalIndent(doc, "", "  ")
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
	fmt.Fprintf(c.App.ErrWriter, "exported %d checkpoints and %d closed shards of group %s on %s to %s\n",
		len(doc.Checkpoints), len(doc.Closed), doc.Group, doc.StreamID, path)
	return nil
}

// positions returns the checkpoints an export holds (closed shards without
// one as SHARD_END) and its start override, if any.
func (d ExportDocument) positions() (map[string]consumer.Position, *consumer.StartOverride, error) {
	out := make(map[string]consumer.Position, len(d.Checkpoints)+len(d.Closed))
	for shard, v := range d.Checkpoints {
		p, err := consumer.ParsePosition(v)
		if err != nil {
			return nil, nil, fmt.Errorf("shard %s: %w", shard, err)
		}
		out[shard] = p
	}
	for _, shard := range d.Closed {
		if _, ok := out[shard]; !ok {
			out[shard] = consumer.Position{ShardEnd: true}
		}
	}
	if d.StartOverride == "" {
		return out, nil, nil
	}
	so, err := consumer.ParseStartOverride(d.StartOverride)
	if err != nil {
		return nil, nil, fmt.Errorf("start_override: %w", err)
	}
	return out, &so, nil
}
