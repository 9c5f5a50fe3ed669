package ops

import (
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"os"
	"slices"
	"time"

	"github.com/urfave/cli/v2"

	"github.com/connect-kinesis/connect-kinesis/internal/consumer"
	"github.com/connect-kinesis/connect-kinesis/internal/streams"
	"github.com/connect-kinesis/connect-kinesis/plugins/checkpointer"
)

// exportFormat marks a document `checkpoints export` wrote.
const exportFormat = "connect-kinesis-checkpoints/v1"

// ExportDocument is what `checkpoints export` writes: everything a reset
// replaces (checkpoints, the closed set, the start override and the
// per-shard starts an import wrote), so that `reset --to sequences=FILE`
// puts a group back where it was.
type ExportDocument struct {
	Format        string            `json:"format"`
	Stream        string            `json:"stream"`
	StreamID      string            `json:"stream_id"`
	Group         string            `json:"group"`
	ExportedAt    time.Time         `json:"exported_at"`
	StartOverride string            `json:"start_override,omitempty"`
	Checkpoints   map[string]string `json:"checkpoints"`
	Closed        []string          `json:"closed,omitempty"`
	// ShardStarts are where shards without a checkpoint begin, ahead of
	// the start override (trim_horizon or at_timestamp=…), as an import
	// of a KCL table stores them.
	ShardStarts map[string]string `json:"shard_starts,omitempty"`
	// Delivered are the redelivery marks: per shard the highest position
	// the group may have delivered. A reset from the export writes them
	// back, only forwards; releases that know none ignore the field.
	Delivered map[string]string `json:"delivered,omitempty"`
}

func runExport(c *cli.Context) error {
	if stream := c.String(flagStream); (stream == "" && c.String(flagStreamID) == "") || streams.IsPattern(stream) {
		return runExportPattern(c)
	}
	o, err := openFromFlags(c)
	if err != nil {
		return err
	}
	defer o.cp.Close()
	doc, err := exportDocument(c.Context, o.store, o.stream.Name, o.stream.ID, o.cp.Config().Group)
	if err != nil {
		return err
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
	fmt.Fprintf(c.App.ErrWriter, "exported %d checkpoints, %d closed shards and %d per-shard starts of group %s on %s to %s\n",
		len(doc.Checkpoints), len(doc.Closed), len(doc.ShardStarts), doc.Group, doc.StreamID, path)
	return nil
}

// exportDocument reads what an export holds of one stream's store, in one
// read (Store.Snapshot): a shard closing meanwhile is exported either open
// with its checkpoint before the close, or closed.
func exportDocument(ctx context.Context, store *checkpointer.Store, name, id, group string) (ExportDocument, error) {
	snap, err := store.Snapshot(ctx)
	if err != nil {
		return ExportDocument{}, err
	}
	doc := ExportDocument{
		Format: exportFormat, Stream: name, StreamID: id, Group: group,
		ExportedAt: time.Now().UTC(), Checkpoints: make(map[string]string, len(snap.Checkpoints)),
		Closed: slices.Sorted(maps.Keys(snap.Closed)),
	}
	for id, p := range snap.Checkpoints {
		doc.Checkpoints[id] = p.String()
	}
	if len(snap.ShardStarts) > 0 {
		doc.ShardStarts = make(map[string]string, len(snap.ShardStarts))
	}
	for id, so := range snap.ShardStarts {
		doc.ShardStarts[id] = so.String()
	}
	if snap.Start != nil {
		doc.StartOverride = snap.Start.String()
	}
	if len(snap.Delivered) > 0 {
		doc.Delivered = make(map[string]string, len(snap.Delivered))
	}
	for id, p := range snap.Delivered {
		doc.Delivered[id] = p.String()
	}
	return doc, nil
}

// exportedState is what an export puts back: checkpoints, the start
// override and the per-shard starts.
type exportedState struct {
	positions map[string]consumer.Position
	start     *consumer.StartOverride
	starts    map[string]consumer.StartOverride
	delivered map[string]consumer.Position
	origin    fileOrigin
}

// state returns what an export holds: its checkpoints (closed shards
// without one as SHARD_END), its start override, if any, and its per-shard
// starts.
func (d ExportDocument) state() (exportedState, error) {
	st := exportedState{positions: make(map[string]consumer.Position, len(d.Checkpoints)+len(d.Closed))}
	for shard, v := range d.Checkpoints {
		p, err := consumer.ParsePosition(v)
		if err != nil {
			return exportedState{}, fmt.Errorf("shard %s: %w", shard, err)
		}
		st.positions[shard] = p
	}
	for _, shard := range d.Closed {
		if _, ok := st.positions[shard]; !ok {
			st.positions[shard] = consumer.Position{ShardEnd: true}
		}
	}
	if len(d.ShardStarts) > 0 {
		st.starts = make(map[string]consumer.StartOverride, len(d.ShardStarts))
	}
	for shard, v := range d.ShardStarts {
		so, err := consumer.ParseStartOverride(v)
		if err != nil {
			return exportedState{}, fmt.Errorf("shard_starts, shard %s: %w", shard, err)
		}
		st.starts[shard] = so
	}
	for shard, v := range d.Delivered {
		p, err := consumer.ParsePosition(v)
		if err != nil {
			return exportedState{}, fmt.Errorf("delivered, shard %s: %w", shard, err)
		}
		if st.delivered == nil {
			st.delivered = make(map[string]consumer.Position, len(d.Delivered))
		}
		st.delivered[shard] = p
	}
	if d.StartOverride == "" {
		return st, nil
	}
	so, err := consumer.ParseStartOverride(d.StartOverride)
	if err != nil {
		return exportedState{}, fmt.Errorf("start_override: %w", err)
	}
	st.start = &so
	return st, nil
}
