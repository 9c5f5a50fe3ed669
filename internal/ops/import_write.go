package ops

import (
	"context"
	"errors"
	"fmt"
	"io"
	"strings"

	"github.com/urfave/cli/v2"

	"github.com/connect-kinesis/connect-kinesis/internal/consumer"
	"github.com/connect-kinesis/connect-kinesis/plugins/checkpointer"
)

// groupStarts is where the group's shards without a checkpoint begin
// before an import: an import replaces checkpoints, not these, so a group
// once moved with `reset --to latest` or at_timestamp keeps its start.
type groupStarts struct {
	// override is the group's start override; nil when none.
	override *consumer.StartOverride
	// shards are the per-shard starts an earlier import stored.
	shards map[string]consumer.StartOverride
}

func readGroupStarts(ctx context.Context, store *checkpointer.Store) (groupStarts, error) {
	var gs groupStarts
	so, ok, err := store.StartOverride(ctx)
	if err != nil {
		return gs, err
	}
	if ok {
		gs.override = &so
	}
	gs.shards, err = store.ShardStarts(ctx)
	return gs, err
}

// kept returns the per-shard start of shard the import leaves in place:
// one the group had, for a shard the import gives neither a checkpoint
// nor a start of its own.
func (gs groupStarts) kept(plan importPlan, shard string) (consumer.StartOverride, bool) {
	if _, ok := plan.Positions[shard]; ok {
		return consumer.StartOverride{}, false
	}
	if _, ok := plan.Starts[shard]; ok {
		return consumer.StartOverride{}, false
	}
	st, ok := gs.shards[shard]
	return st, ok
}

// startAfter says where a shard without a checkpoint begins after the
// import: its imported start, its kept start, the group's start override,
// or the pipelines' start_position.
func (gs groupStarts) startAfter(plan importPlan, shard string) string {
	if st, ok := plan.Starts[shard]; ok {
		return st.String()
	}
	if st, ok := gs.kept(plan, shard); ok {
		return st.String() + " (kept)"
	}
	return gs.otherShards()
}

// otherShards says where shards with no checkpoint or start of their own
// begin.
func (gs groupStarts) otherShards() string {
	if gs.override != nil {
		return gs.override.String() + " (the group's start override, kept)"
	}
	return "the pipelines' start_position"
}

// printKeptStarts tells the operator which starts the import keeps.
func printKeptStarts(w io.Writer, gs groupStarts) {
	if gs.override != nil {
		fmt.Fprintf(w, "start override %s is kept: shards without a checkpoint or a start of their own begin there\n", gs.override)
	}
}

// writeImport writes the plan once no reader of the group committed since
// the rewind check was made on what it had committed: a reader fenced out
// by --fence-readers may commit until the write, and a commit the check
// did not see would be rewound unlisted. The check is made again on what
// the write found, a few times, before it gives up.
func writeImport(c *cli.Context, o *opened, plan importPlan, gs groupStarts, fence bool) (checkpointer.ResetResult, error) {
	ctx := c.Context
	const attempts = 5
	for range attempts {
		before, err := o.store.Checkpoints(ctx)
		if err != nil {
			return checkpointer.ResetResult{}, err
		}
		rewinds := findRewinds(ctx, o.api, o.stream, before, plan, gs)
		if len(rewinds) > 0 && !c.Bool(flagAllowRewind) {
			return checkpointer.ResetResult{}, fmt.Errorf("the import would move %d checkpoints of group %s back, so what the group already read would be read again:\n  %s\npass --%s to import anyway",
				len(rewinds), o.cp.Config().Group, strings.Join(rewinds, "\n  "), flagAllowRewind)
		}
		beforeImportWrite()
		res, err := o.store.ReplaceCheckpoints(ctx, before, plan.Positions, plan.Starts, fence)
		if errors.Is(err, checkpointer.ErrCheckpointsMoved) {
			continue
		}
		if errors.Is(err, checkpointer.ErrLiveLeases) {
			return res, fmt.Errorf("pipelines of group %s hold live leases on %s: stop them first, or pass --%s to fence them out (their next renewal or commit fails and they stop reading those shards): %w",
				o.cp.Config().Group, strings.Join(res.LiveLeases, ", "), flagFenceReaders, checkpointer.ErrLiveLeases)
		}
		return res, err
	}
	return checkpointer.ResetResult{}, fmt.Errorf("pipelines of group %s committed between each of %d reads of its checkpoints and the write, so the import could not tell what it would move back; nothing was written: stop them and import again: %w",
		o.cp.Config().Group, attempts, checkpointer.ErrCheckpointsMoved)
}
