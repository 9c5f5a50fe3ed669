package ops

import (
	"context"
	"fmt"
	"io"
	"maps"
	"slices"
	"strings"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/urfave/cli/v2"

	"github.com/connect-kinesis/connect-kinesis/internal/awsconf"
	"github.com/connect-kinesis/connect-kinesis/internal/consumer"
	"github.com/connect-kinesis/connect-kinesis/internal/streams"
)

// Sources `checkpoints import --from` reads.
const (
	SourceConnect = "connect"
	SourceKCL     = "kcl"
)

// foreignShard is one shard's progress as another consumer stored it.
type foreignShard struct {
	Shard string
	// Position is the checkpoint in this project's form; zero when the
	// source has none (it never started the shard, or its value is a
	// start sentinel).
	Position consumer.Position
	// Sentinel is the source's start marker for a shard it had not started
	// (KCL TRIM_HORIZON, LATEST, AT_TIMESTAMP).
	Sentinel string
	// Owner is who the source says holds the shard, if anyone.
	Owner string
	// Live is true when the source's own lease may still be running: its
	// expiry is ahead (Connect), or it names an owner (the KCL, whose
	// leases carry no expiry).
	Live bool
	// LiveUntil is when a live lease expires, zero when the source does
	// not store it.
	LiveUntil time.Time
	// Parents are the shard's parents as the source recorded them, sorted;
	// nil when the source does not record them (Connect).
	Parents []string
}

// foreignTable is what a source reader found for one stream.
type foreignTable struct {
	// Describe names the source for the operator: tool, table, stream key.
	Describe string
	Shards   map[string]foreignShard
	// Warnings are things the operator should know before importing.
	Warnings []string
}

// importPlan is what an import writes, and why, per shard.
type importPlan struct {
	Positions map[string]consumer.Position
	// Starts are where shards the source had not started begin: at their
	// beginning (KCL TRIM_HORIZON) or at a timestamp (KCL AT_TIMESTAMP).
	Starts map[string]consumer.StartOverride
	// Notes say, per shard, why it gets (or does not get) a checkpoint.
	Notes map[string]string
}

// planImport turns a source's shards into checkpoints of this project.
//
// A shard the stream lists as closed but the source has no entry for is
// taken as finished (SHARD_END) when every parent of it is finished too:
// Redpanda Connect deletes a shard's row when it reaches the end and never
// starts a closed shard, and the KCL deletes the leases of finished shards
// (or never creates leases for closed ancestors when it starts at LATEST).
// A closed shard below an unfinished one is left without a checkpoint, so
// this project reads it after its parents, as its gate always does.
//
// A KCL lease at TRIM_HORIZON (how the KCL creates a child shard's lease
// while its parent is read) becomes a start at the shard's beginning, and
// one at AT_TIMESTAMP a start at atTimestamp, the KCL application's
// configured timestamp, which its table does not hold (zero: refused).
func planImport(src foreignTable, stream streamInfo, listed bool, atTimestamp time.Time) (importPlan, error) {
	plan := importPlan{Positions: map[string]consumer.Position{}, Starts: map[string]consumer.StartOverride{}, Notes: map[string]string{}}
	var needTimestamp []string
	for id, sh := range src.Shards {
		switch {
		case !sh.Position.IsZero():
			plan.Positions[id] = sh.Position
			if sh.Position.ShardEnd {
				plan.Notes[id] = "finished in the source"
			}
		case sh.Sentinel == kclTrimHorizon:
			plan.Starts[id] = consumer.StartOverride{Mode: consumer.StartTrimHorizon}
			plan.Notes[id] = "TRIM_HORIZON in the source (not started): starts at the shard's beginning"
		case sh.Sentinel == kclAtTimestamp && atTimestamp.IsZero():
			needTimestamp = append(needTimestamp, id)
		case sh.Sentinel == kclAtTimestamp:
			o := consumer.StartOverride{Mode: consumer.StartAtTimestamp, Timestamp: atTimestamp}
			plan.Starts[id] = o
			plan.Notes[id] = "AT_TIMESTAMP in the source (not started): starts at " + o.Timestamp.UTC().Format(time.RFC3339Nano)
		case sh.Sentinel != "":
			plan.Notes[id] = sh.Sentinel + " in the source (not started): starts like a new shard"
		default:
			plan.Notes[id] = "no checkpoint in the source's entry: starts like a new shard"
		}
	}
	if len(needTimestamp) > 0 {
		slices.Sort(needTimestamp)
		return plan, fmt.Errorf("leases of %s are at AT_TIMESTAMP: the KCL keeps that timestamp in the application's configuration (InitialPositionInStreamExtended), not in the table; pass it with --%s <RFC3339>",
			strings.Join(needTimestamp, ", "), flagAtTimestamp)
	}
	if !listed {
		return plan, nil
	}
	byID := make(map[string]streamShard, len(stream.Shards))
	for _, sh := range stream.shards() {
		byID[sh.ID] = sh
	}
	var finished func(id string, seen map[string]bool) bool
	finished = func(id string, seen map[string]bool) bool {
		if p, ok := plan.Positions[id]; ok {
			return p.ShardEnd
		}
		sh, isListed := byID[id]
		if !isListed {
			return true // trimmed: the gate counts it as closed
		}
		if _, inSource := src.Shards[id]; inSource || !sh.Closed || seen[id] {
			return false
		}
		seen[id] = true
		for _, p := range sh.Parents {
			if !finished(p, seen) {
				return false
			}
		}
		return true
	}
	for _, sh := range stream.shards() {
		if _, inSource := src.Shards[sh.ID]; inSource {
			continue
		}
		if !sh.Closed {
			plan.Notes[sh.ID] = "no entry in the source: starts like a new shard"
			continue
		}
		if finished(sh.ID, map[string]bool{}) {
			plan.Positions[sh.ID] = consumer.Position{ShardEnd: true}
			plan.Notes[sh.ID] = "closed, no entry in the source: taken as finished"
		} else {
			plan.Notes[sh.ID] = "closed, no entry in the source, a parent is unfinished: read after its parents"
		}
	}
	return plan, nil
}

func runImport(c *cli.Context) error {
	from, table := c.String(flagFrom), c.String(flagTable)
	if from != SourceConnect && from != SourceKCL {
		return fmt.Errorf("flag --%s: %q is not a source; use %s (a Redpanda Connect aws_kinesis DynamoDB table) or %s (a KCL 2.x/3.x lease table)", flagFrom, from, SourceConnect, SourceKCL)
	}
	if streams.IsPattern(c.String(flagStream)) {
		return runImportPattern(c, from, table)
	}
	o, err := openFromFlags(c)
	if err != nil {
		return err
	}
	defer o.cp.Close()
	items, err := scanSourceTable(c, table)
	if err != nil {
		return err
	}
	return importStream(c, o, from, table, items, c.String(flagSourceStream))
}

// scanSourceTable reads every item of the source's DynamoDB table.
func scanSourceTable(c *cli.Context, table string) ([]item, error) {
	ctx := c.Context
	// The same settings as the Kinesis side of the command: with --endpoint
	// (an emulator) the region is not checked against AWS' public names.
	settings := awsconf.Settings{Region: c.String(flagRegion), Endpoint: c.String(flagEndpoint), Profile: c.String(flagProfile)}
	awsCfg, err := settings.Load(ctx)
	if err != nil {
		return nil, err
	}
	api := dynamodb.NewFromConfig(awsCfg, func(opts *dynamodb.Options) {
		if ep := c.String(flagDynamoEndpoint); ep != "" {
			opts.BaseEndpoint = aws.String(ep)
		}
	})
	return scanTable(ctx, api, table)
}

// importStream imports the source's checkpoints of one stream into the
// group: the whole import of one --stream.
func importStream(c *cli.Context, o *opened, from, table string, items []item, sourceStream string) error {
	ctx := c.Context
	var err error
	var src foreignTable
	switch from {
	case SourceConnect:
		src, err = readConnectTable(items, table, o.stream, sourceStream)
	case SourceKCL:
		src, err = readKCLTable(items, table, o.stream, sourceStream)
	}
	if err != nil {
		return err
	}
	if !o.listed {
		src.Warnings = append(src.Warnings, fmt.Sprintf("with --%s the stream's shards are unknown: closed shards the source has no entry for are not marked finished", flagStreamID))
	}
	var atTimestamp time.Time
	if v := c.String(flagAtTimestamp); v != "" {
		if atTimestamp, err = time.Parse(time.RFC3339Nano, v); err != nil {
			return fmt.Errorf("flag --%s: %q is not an RFC3339 time, e.g. 2024-05-01T12:00:00Z", flagAtTimestamp, v)
		}
	}
	plan, err := planImport(src, o.stream, o.listed, atTimestamp)
	if err != nil {
		return err
	}

	w := c.App.Writer
	over := importOverridesOf(c)
	fmt.Fprintf(w, "importing %s into group %s on %s\n", src.Describe, o.cp.Config().Group, o.stream.ID)
	live := liveSourceLeases(src)
	if len(live) > 0 && !over.liveSource && !c.Bool(flagDryRun) {
		return fmt.Errorf("the source still holds live leases: %s; stop the old consumer first (stopped, not paused: a paused consumer resumes and moves its checkpoints on), or pass --%s",
			strings.Join(live, ", "), flagIgnoreLiveSource)
	}
	for _, warn := range src.Warnings {
		fmt.Fprintf(w, "warning: %s\n", warn)
	}
	if o.listed {
		listedIDs := o.stream.listed()
		for _, id := range slices.Sorted(maps.Keys(plan.Positions)) {
			if !listedIDs[id] {
				fmt.Fprintf(w, "warning: %s is not a shard the stream lists (trimmed?); its checkpoint is written anyway\n", id)
			}
		}
		if !c.Bool(flagDryRun) {
			if err := checkOpenShards(src, o.stream, plan, allowedOpenShards(c)); err != nil {
				return err
			}
		}
		if err := checkPositionsInStream(ctx, o.api, o.stream, plan.Positions); err != nil {
			return err
		}
	}
	gs, err := readGroupStarts(ctx, o.store)
	if err != nil {
		return err
	}
	for id := range gs.shards {
		if st, ok := gs.kept(plan, id); ok {
			plan.Notes[id] = "no checkpoint or start in the source: keeps the group's start for it, " + st.String()
		}
	}
	if c.Bool(flagDryRun) {
		var conflicts []openShardConflict
		if o.listed {
			conflicts = openShardConflicts(src, o.stream, plan, allowedOpenShards(c))
		}
		return printDryRun(ctx, w, o, plan, gs, live, conflicts)
	}
	res, err := writeImport(c, o, plan, gs, over.fenceReaders)
	if err != nil {
		return err
	}
	printChanges(w, res, plan.Positions)
	printNotes(w, plan)
	fmt.Fprintf(w, "other shards without a checkpoint start at %s (a child of a finished shard at its beginning)\n", gs.otherShards())
	return nil
}

// beforeImportWrite runs just before an import writes: a test makes a
// running reader commit there.
var beforeImportWrite = func() {}

// printDryRun shows what an import would write over the group's current
// checkpoints, and whether it would be refused, without changing anything.
func printDryRun(ctx context.Context, w io.Writer, o *opened, plan importPlan, gs groupStarts, sourceLive []string, openConflicts []openShardConflict) error {
	before, err := o.store.Checkpoints(ctx)
	if err != nil {
		return err
	}
	rewinds := findRewinds(ctx, o.api, o.stream, before, plan, gs)
	leases, err := o.store.Leases(ctx)
	if err != nil {
		return err
	}
	fmt.Fprintln(w, "dry run: nothing is written; the import would replace the group's checkpoints with:")
	ids := slices.AppendSeq(slices.AppendSeq(slices.AppendSeq(slices.Collect(maps.Keys(before)), maps.Keys(plan.Positions)), maps.Keys(plan.Starts)), maps.Keys(gs.shards))
	slices.Sort(ids)
	for _, id := range slices.Compact(ids) {
		from, to := "(none)", "(none)"
		if p, ok := before[id]; ok {
			from = p.String()
		}
		if p, ok := plan.Positions[id]; ok {
			to = p.String()
		} else if st, ok := plan.Starts[id]; ok {
			to = "(none; starts at " + st.String() + ")"
		} else if st, ok := gs.kept(plan, id); ok {
			to = "(none; starts at " + st.String() + ", kept)"
		}
		fmt.Fprintf(w, "  %s: %s -> %s\n", id, from, to)
	}
	printNotes(w, plan)
	printKeptStarts(w, gs)
	var held []string
	for id, l := range leases {
		if !l.Expired {
			held = append(held, id)
		}
	}
	slices.Sort(held)
	if len(held) > 0 {
		fmt.Fprintf(w, "would be refused without --%s: the group holds live leases on %s\n", flagFenceReaders, strings.Join(held, ", "))
	}
	if len(sourceLive) > 0 {
		fmt.Fprintf(w, "would be refused without --%s: the source holds live leases: %s\n", flagIgnoreLiveSource, strings.Join(sourceLive, ", "))
	}
	for _, c := range openConflicts {
		fmt.Fprintf(w, "would be refused without --%s %s: %s\n", flagAllowOpenShard, c.shard, c.why)
	}
	if len(rewinds) > 0 {
		fmt.Fprintf(w, "would be refused without --%s: checkpoints would move back:\n  %s\n", flagAllowRewind, strings.Join(rewinds, "\n  "))
	}
	return nil
}

func printNotes(w io.Writer, plan importPlan) {
	if len(plan.Notes) == 0 {
		return
	}
	fmt.Fprintln(w, "notes:")
	for _, id := range slices.Sorted(maps.Keys(plan.Notes)) {
		fmt.Fprintf(w, "  %s: %s\n", id, plan.Notes[id])
	}
}
