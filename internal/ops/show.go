package ops

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"iter"
	"maps"
	"os"
	"os/signal"
	"slices"
	"syscall"
	"time"

	"github.com/urfave/cli/v2"

	"github.com/connect-kinesis/connect-kinesis/internal/streams"
	"github.com/connect-kinesis/connect-kinesis/plugins/checkpointer"
)

// Shard states printed by `show`.
const (
	StateOpen              = "open"
	StateReady             = "ready"
	StateWaitingForParents = "waiting-for-parents"
	StateClosed            = "closed"
	StateTrimmed           = "trimmed"
)

// ShardRow is one line of `show`.
type ShardRow struct {
	Shard          string   `json:"shard"`
	State          string   `json:"state"`
	Parents        []string `json:"parents,omitempty"`
	Owner          string   `json:"owner,omitempty"`
	LeaseExpiresIn string   `json:"lease_expires_in,omitempty"`
	Token          int64    `json:"fencing_token,omitempty"`
	Checkpoint     string   `json:"checkpoint,omitempty"`
	// Start is where a shard without a checkpoint begins, as an import
	// stored it: "trim_horizon" (its beginning) or "at_timestamp=<time>".
	Start     string `json:"start,omitempty"`
	HandoffTo string `json:"handoff_requested_by,omitempty"`
	// Unowned marks a ready shard no live lease covers: nobody reads it.
	Unowned bool `json:"unowned,omitempty"`
	// LagMillis and LastDelivered are what the shard's owner last
	// published with a lease renewal: MillisBehindLatest (or the age of a
	// failed record the shard waits for, when larger) and when it last
	// delivered a batch (by that instance's clock).
	LagMillis     *int64     `json:"lag_millis,omitempty"`
	LastDelivered *time.Time `json:"last_delivered_at,omitempty"`
	ProgressBy    string     `json:"progress_published_by,omitempty"`
	// BytesPerSecond is the shard's load as its owner last published it
	// (absent from owners of a release that publishes none).
	BytesPerSecond *int64 `json:"bytes_per_second,omitempty"`
	// Delivered is the shard's redelivery mark: the highest position the
	// group may have handed to a pipeline.
	Delivered string `json:"delivered,omitempty"`
}

// ShowReport is the `show --json` document; `reset --to sequences=FILE`
// reads it back.
type ShowReport struct {
	Stream        string            `json:"stream"`
	StreamID      string            `json:"stream_id"`
	Group         string            `json:"group"`
	Keys          checkpointer.Keys `json:"keys"`
	StartOverride string            `json:"start_override,omitempty"`
	// NoState is true when the group has no key at all on the stream: no
	// pipeline of it has run there (or its state was deleted). Shards is
	// then empty.
	NoState     bool       `json:"no_state,omitempty"`
	Shards      []ShardRow `json:"shards"`
	LiveMembers []string   `json:"live_members"`
	// At is when the report was read (local clock).
	At time.Time `json:"at"`
}

func runShow(c *cli.Context) error {
	if stream := c.String(flagStream); (stream == "" && c.String(flagStreamID) == "") || streams.IsPattern(stream) {
		return runShowGroup(c)
	}
	o, err := openFromFlags(c)
	if err != nil {
		return err
	}
	defer o.cp.Close()
	if c.Bool(flagWatch) {
		return watchShow(c, o)
	}
	rep, err := buildShow(c.Context, o)
	if err != nil {
		return err
	}
	return writeShow(c.App.Writer, rep, c.Bool(flagJSON))
}

func writeShow(w io.Writer, rep ShowReport, asJSON bool) error {
	if asJSON {
		enc := json.NewEncoder(w)
		enc.SetIndent("", "  ")
		return enc.Encode(rep)
	}
	printShow(w, rep)
	return nil
}

// watchShow redraws the report every second until Ctrl-C (or SIGTERM), and
// lists the stream's shards again every few seconds so a reshard shows up.
// A failed read is shown in place of the table; the next tick tries again.
func watchShow(c *cli.Context, o *opened) error {
	ctx, stop := signal.NotifyContext(c.Context, os.Interrupt, syscall.SIGTERM)
	defer stop()
	tick := time.NewTicker(watchInterval)
	defer tick.Stop()
	asJSON := c.Bool(flagJSON)
	for n := 0; ; n++ {
		if n > 0 && n%watchRelistEvery == 0 && o.relist != nil {
			if info, err := o.relist(ctx); err == nil {
				o.stream = info
			}
		}
		var buf bytes.Buffer
		if !asJSON {
			// Home the cursor and clear the screen, then draw the frame at
			// once so it does not flicker.
			buf.WriteString("\033[H\033[2J")
			fmt.Fprintf(&buf, "every %v: %s (Ctrl-C to stop)\n", watchInterval, time.Now().Format("15:04:05"))
		}
		rep, err := buildShow(ctx, o)
		if ctx.Err() != nil {
			return nil
		}
		if err != nil {
			fmt.Fprintf(&buf, "reading the group failed (retrying): %v\n", err)
		} else if err := writeShow(&buf, rep, asJSON); err != nil {
			return err
		}
		if _, err := c.App.Writer.Write(buf.Bytes()); err != nil {
			return err
		}
		select {
		case <-ctx.Done():
			return nil
		case <-tick.C:
		}
	}
}

// How often `show --watch` redraws, and after how many redraws it lists
// the stream's shards again.
const (
	watchInterval    = time.Second
	watchRelistEvery = 10
)

func buildShow(ctx context.Context, o *opened) (ShowReport, error) {
	s := o.store
	rep := ShowReport{Stream: o.stream.Name, StreamID: o.stream.ID, Group: o.cp.Config().Group, Keys: s.Keys(), At: time.Now()}
	has, err := s.HasState(ctx)
	if err != nil {
		return rep, err
	}
	if !has {
		rep.NoState = true
		rep.Shards = []ShardRow{}
		rep.LiveMembers = []string{}
		return rep, nil
	}
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
	handoff, err := s.AllHandoffRequests(ctx)
	if err != nil {
		return rep, err
	}
	progress, err := s.Progress(ctx)
	if err != nil {
		return rep, err
	}
	if rep.LiveMembers, err = s.LiveMembersReadOnly(ctx); err != nil {
		return rep, err
	}
	starts, err := s.ShardStarts(ctx)
	if err != nil {
		return rep, err
	}
	delivered, err := s.Delivered(ctx)
	if err != nil {
		return rep, err
	}
	if so, ok, err := s.StartOverride(ctx); err != nil {
		return rep, err
	} else if ok {
		rep.StartOverride = so.String()
	}

	listed := o.stream.listed()
	row := func(id string) ShardRow {
		r := ShardRow{Shard: id}
		if p, ok := ckpts[id]; ok {
			r.Checkpoint = p.String()
		} else if st, ok := starts[id]; ok {
			r.Start = st.String()
		}
		if l, ok := leases[id]; ok {
			r.Token = l.Token
			if !l.Expired {
				r.Owner = l.Owner
				r.LeaseExpiresIn = l.ExpiresIn.Round(100 * time.Millisecond).String()
			}
		}
		r.HandoffTo = handoff[id]
		if p, ok := delivered[id]; ok {
			r.Delivered = p.String()
		}
		if p, ok := progress[id]; ok {
			r.LagMillis, r.ProgressBy = &p.LagMillis, p.Owner
			if p.LoadKnown {
				r.BytesPerSecond = &p.BytesPerSecond
			}
			if !p.LastDelivered.IsZero() {
				r.LastDelivered = &p.LastDelivered
			}
		}
		return r
	}
	// finish settles what depends on the state: a closed or trimmed shard
	// has no lag worth showing; a ready one without an owner is flagged.
	finish := func(r ShardRow) ShardRow {
		switch r.State {
		case StateClosed, StateTrimmed:
			r.LagMillis, r.LastDelivered, r.ProgressBy, r.BytesPerSecond = nil, nil, "", nil
		case StateReady:
			r.Unowned = r.Owner == ""
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
		rep.Shards = append(rep.Shards, finish(r))
	}
	// Shards Redis knows that the stream no longer lists (trimmed past
	// retention, or every shard with --stream-id).
	unlisted := map[string]bool{}
	for _, ids := range []iter.Seq[string]{maps.Keys(ckpts), maps.Keys(closed), maps.Keys(leases)} {
		for id := range ids {
			if !listed[id] {
				unlisted[id] = true
			}
		}
	}
	ids := slices.Sorted(maps.Keys(unlisted))
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
		rep.Shards = append(rep.Shards, finish(r))
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
