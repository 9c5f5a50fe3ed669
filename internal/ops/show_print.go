package ops

import (
	"fmt"
	"io"
	"strings"
	"text/tabwriter"
	"time"
)

// printShow writes the report for a person: the group, then a table of
// shards with their position, state, owner and lag.
func printShow(w io.Writer, rep ShowReport) {
	fmt.Fprintf(w, "stream: %s\nkey identity: %s\ngroup: %s\n", rep.Stream, rep.StreamID, rep.Group)
	if rep.NoState {
		fmt.Fprintf(w, "\ngroup %s has no state on this stream: no checkpoints, leases, members or progress under %s\n"+
			"No pipeline of this group has run against the stream (or its state was deleted). Check --group, --key-prefix and --stream;\n"+
			"a new pipeline of the group starts at its start_position.\n", rep.Group, strings.TrimSuffix(rep.Keys.Checkpoints, "ckpt")+"*")
		return
	}
	if rep.StartOverride != "" {
		fmt.Fprintf(w, "start override (from a reset): %s\n", rep.StartOverride)
	}
	fmt.Fprintln(w)
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "SHARD\tSTATE\tPARENTS\tOWNER\tEXPIRES IN\tTOKEN\tCHECKPOINT\tLAG\tLAST READ\tHAND-OFF TO")
	dash := func(s string) string {
		if s == "" {
			return "-"
		}
		return s
	}
	var unowned []string
	for _, r := range rep.Shards {
		token := "-"
		if r.Token > 0 {
			token = fmt.Sprint(r.Token)
		}
		owner := r.Owner
		if r.Unowned {
			owner = "(unowned)"
			unowned = append(unowned, r.Shard)
		}
		lag, last := "-", "-"
		if r.LagMillis != nil {
			lag = roundForHumans(time.Duration(*r.LagMillis) * time.Millisecond)
		}
		if r.LastDelivered != nil {
			last = roundForHumans(rep.At.Sub(*r.LastDelivered)) + " ago"
		}
		ckpt := r.Checkpoint
		if ckpt == "" && r.Start != "" {
			ckpt = "(none; starts at " + r.Start + ")"
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\n", r.Shard, r.State, dash(strings.Join(r.Parents, ",")),
			dash(owner), dash(r.LeaseExpiresIn), token, dash(ckpt), lag, last, dash(r.HandoffTo))
	}
	_ = tw.Flush()
	if len(unowned) > 0 {
		fmt.Fprintf(w, "\n%d ready shards have no owner, so nobody reads them: %s\n", len(unowned), strings.Join(unowned, ", "))
		if len(rep.LiveMembers) == 0 {
			fmt.Fprintln(w, "no pipeline of the group is running")
		} else {
			fmt.Fprintln(w, "a live member takes them at its next rebalance; if they stay unowned, check the members' logs")
		}
	}
	fmt.Fprintf(w, "\nlive members (%d):\n", len(rep.LiveMembers))
	for _, m := range rep.LiveMembers {
		fmt.Fprintf(w, "  %s\n", m)
	}
}

// roundForHumans prints a duration to a tenth of a second below a minute
// and to the second above.
func roundForHumans(d time.Duration) string {
	if d < 0 {
		d = 0
	}
	if d < time.Minute {
		return d.Round(100 * time.Millisecond).String()
	}
	return d.Round(time.Second).String()
}
