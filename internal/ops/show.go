package ops

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"iter"
	"maps"
	"slices"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/urfave/cli/v2"

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
	HandoffTo      string   `json:"handoff_requested_by,omitempty"`
}

// ShowReport is the `show --json` document; `reset --to sequences=FILE`
// reads it back.
type ShowReport struct {
	Stream        string            `json:"stream"`
	StreamID      string            `json:"stream_id"`
	Group         string            `json:"group"`
	Keys          checkpointer.Keys `json:"keys"`
	StartOverride string            `json:"start_override,omitempty"`
	Shards        []ShardRow        `json:"shards"`
	LiveMembers   []string          `json:"live_members"`
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
	rep := ShowReport{Stream: o.stream.Name, StreamID: o.stream.ID, Group: o.cp.Config().Group, Keys: s.Keys()}
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
	if rep.LiveMembers, err = s.LiveMembersReadOnly(ctx); err != nil {
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
		}
		if l, ok := leases[id]; ok {
			r.Token = l.Token
			if !l.Expired {
				r.Owner = l.Owner
				r.LeaseExpiresIn = l.ExpiresIn.Round(100 * time.Millisecond).String()
			}
		}
		r.HandoffTo = handoff[id]
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
