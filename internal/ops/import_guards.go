package ops

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/kinesis"
	"github.com/aws/aws-sdk-go-v2/service/kinesis/types"
	"github.com/failsafe-go/failsafe-go"
	"github.com/urfave/cli/v2"

	"github.com/connect-kinesis/connect-kinesis/internal/consumer"
	"github.com/connect-kinesis/connect-kinesis/internal/kinesisx"
)

// The guard rails of `checkpoints import`: what it refuses before it writes
// anything, and what it says so the operator can decide.

// The two refusals of an import an operator may override, each with its
// own flag: a source whose consumer may still be running, and readers of
// the target group holding live leases (which the import fences out).
// --force, which once overrode both at once, still does, with a warning.
const (
	flagIgnoreLiveSource = "ignore-live-source"
	flagFenceReaders     = "fence-readers"
	flagAllowOpenShard   = "allow-open-shard"
)

// importOverrides are the refusals an operator overrode.
type importOverrides struct{ liveSource, fenceReaders bool }

// importOverridesOf reads the override flags, warning on the deprecated
// --force.
func importOverridesOf(c *cli.Context) importOverrides {
	over := importOverrides{liveSource: c.Bool(flagIgnoreLiveSource), fenceReaders: c.Bool(flagFenceReaders)}
	if c.Bool(flagForce) {
		fmt.Fprintf(c.App.ErrWriter, "warning: --%s is deprecated for import: it means --%s --%s; pass the one you mean\n",
			flagForce, flagIgnoreLiveSource, flagFenceReaders)
		over = importOverrides{liveSource: true, fenceReaders: true}
	}
	return over
}

// liveSourceLeases names the source's live leases, with their owner and
// when they expire (or that the source cannot tell), sorted by shard.
func liveSourceLeases(src foreignTable) []string {
	var live []string
	for _, id := range slices.Sorted(maps.Keys(src.Shards)) {
		sh := src.Shards[id]
		switch {
		case !sh.Live:
		case sh.LiveUntil.IsZero():
			live = append(live, fmt.Sprintf("%s (owner %s; the table stores no expiry: the lease is live while its owner renews it)", id, sh.Owner))
		default:
			live = append(live, fmt.Sprintf("%s (owner %s, expires %s, in %v, unless renewed)", id, sh.Owner,
				sh.LiveUntil.UTC().Format(time.RFC3339), time.Until(sh.LiveUntil).Round(time.Second)))
		}
	}
	return live
}

// foreignPositions asks Kinesis for an iterator at each sequence number an
// import or a reset would write, and lists ("<shard>: <seq>") those that are
// not a record of their shard (another stream's, or of a stream deleted and
// created again under the same name): a reader would stall on them forever,
// so both commands refuse them. One request per shard with a position.
func foreignPositions(ctx context.Context, api kinesisAPI, stream streamInfo, positions map[string]consumer.Position) ([]string, error) {
	if api == nil {
		return nil, nil
	}
	listed := stream.listed()
	retry := failsafe.With(kinesisx.RetryBuilder[*kinesis.GetShardIteratorOutput](operatorBackoff).Build()).WithContext(ctx)
	var foreign []string
	for _, id := range slices.Sorted(maps.Keys(positions)) {
		p := positions[id]
		if p.ShardEnd || !listed[id] {
			continue
		}
		_, err := retry.Get(func() (*kinesis.GetShardIteratorOutput, error) {
			return api.GetShardIterator(ctx, &kinesis.GetShardIteratorInput{
				StreamARN: aws.String(stream.ID), ShardId: aws.String(id),
				ShardIteratorType: types.ShardIteratorTypeAtSequenceNumber, StartingSequenceNumber: aws.String(p.Sequence),
			})
		})
		switch {
		case kinesisx.IsUnknownSequence(err):
			foreign = append(foreign, fmt.Sprintf("%s: %s", id, p.Sequence))
		case err != nil:
			return nil, fmt.Errorf("checking the position of shard %s against stream %s: %w", id, stream.Name, err)
		}
	}
	return foreign, nil
}

// checkPositionsInStream refuses an import whose positions are not records
// of the stream (see foreignPositions).
func checkPositionsInStream(ctx context.Context, api kinesisAPI, stream streamInfo, positions map[string]consumer.Position) error {
	foreign, err := foreignPositions(ctx, api, stream, positions)
	if err != nil {
		return err
	}
	if len(foreign) > 0 {
		return fmt.Errorf("the source's positions of %d shards are not records of stream %s, so a reader would stall on them; "+
			"is the source the checkpoints of another stream (check --%s and --%s)?\n  %s",
			len(foreign), stream.Name, flagStream, flagSourceStream, strings.Join(foreign, "\n  "))
	}
	return nil
}

// findRewinds lists the shards whose checkpoint the import would move back
// (to an earlier position, or away: a shard without an imported position
// loses its checkpoint and starts again), with both positions and, when
// Kinesis still holds both records, how much time of records lies between.
func findRewinds(ctx context.Context, api kinesisAPI, stream streamInfo, before map[string]consumer.Position, plan importPlan, gs groupStarts) []string {
	var out []string
	for _, id := range slices.Sorted(maps.Keys(before)) {
		cur := before[id]
		next, ok := plan.Positions[id]
		switch {
		case !ok:
			out = append(out, fmt.Sprintf("%s: %s -> none (starts again at %s)", id, cur, gs.startAfter(plan, id)))
		case next.Compare(cur) < 0:
			out = append(out, fmt.Sprintf("%s: %s -> %s%s", id, cur, next, rewindSpan(ctx, api, stream, id, cur, next)))
		}
	}
	return out
}

// rewindSpan says how far back a checkpoint moves in time: the arrival
// times of the two records. Empty when Kinesis cannot tell (a finished
// shard, records trimmed, no stream lookup).
func rewindSpan(ctx context.Context, api kinesisAPI, stream streamInfo, shard string, cur, next consumer.Position) string {
	if api == nil || cur.ShardEnd {
		return ""
	}
	from, err1 := arrivalOf(ctx, api, stream, shard, next.Sequence)
	to, err2 := arrivalOf(ctx, api, stream, shard, cur.Sequence)
	if err1 != nil || err2 != nil {
		return ""
	}
	return fmt.Sprintf(" (back %v: records that arrived from %s to %s are read again)",
		to.Sub(from).Round(time.Second), from.UTC().Format(time.RFC3339), to.UTC().Format(time.RFC3339))
}

// arrivalOf reads the arrival time of the record at seq.
func arrivalOf(ctx context.Context, api kinesisAPI, stream streamInfo, shard, seq string) (time.Time, error) {
	it, err := api.GetShardIterator(ctx, &kinesis.GetShardIteratorInput{
		StreamARN: aws.String(stream.ID), ShardId: aws.String(shard),
		ShardIteratorType: types.ShardIteratorTypeAtSequenceNumber, StartingSequenceNumber: aws.String(seq),
	})
	if err != nil {
		return time.Time{}, err
	}
	recs, err := api.GetRecords(ctx, &kinesis.GetRecordsInput{StreamARN: aws.String(stream.ID), ShardIterator: it.ShardIterator, Limit: aws.Int32(1)})
	if err != nil {
		return time.Time{}, err
	}
	if len(recs.Records) == 0 || recs.Records[0].ApproximateArrivalTimestamp == nil {
		return time.Time{}, errors.New("no record")
	}
	return *recs.Records[0].ApproximateArrivalTimestamp, nil
}

// openShardConflict is a shard the plan would close, or start, although
// the stream lists it open, and why that is wrong.
type openShardConflict struct{ shard, why string }

func (o openShardConflict) String() string {
	return fmt.Sprintf("%s: %s (--%s %s)", o.shard, o.why, flagAllowOpenShard, o.shard)
}

// openShardConflicts lists what the plan would write against a shard the
// stream lists open that the source cannot honestly say of it: SHARD_END
// (the shard goes into the closed set and is never read), or a start the
// source gives a shard under other parents than the listing does (the
// lease is of another shard that happens to share its id). Both mean the
// source is the table of another application, or of a stream of the same
// name deleted and created again, since every stream has a
// shardId-000000000000. A shard the operator named in allowed is left out.
func openShardConflicts(src foreignTable, stream streamInfo, plan importPlan, allowed map[string]bool) []openShardConflict {
	open := map[string]streamShard{}
	for _, sh := range stream.shards() {
		if !sh.Closed {
			open[sh.ID] = sh
		}
	}
	var out []openShardConflict
	for _, id := range slices.Sorted(maps.Keys(open)) {
		if allowed[id] {
			continue
		}
		if p, ok := plan.Positions[id]; ok && p.ShardEnd {
			out = append(out, openShardConflict{id, "SHARD_END in the source, but the stream lists it open: it would never be read"})
			continue
		}
		st, ok := plan.Starts[id]
		if !ok {
			continue
		}
		sh := src.Shards[id]
		listed := slices.Sorted(slices.Values(open[id].Parents))
		if sh.Parents != nil && !slices.Equal(sh.Parents, listed) {
			out = append(out, openShardConflict{id, fmt.Sprintf("a start (%s) in the source for a shard with parents [%s], but the stream lists it open with parents [%s]",
				st, strings.Join(sh.Parents, " "), strings.Join(listed, " "))})
		}
	}
	return out
}

// checkOpenShards refuses an import that would close an open shard or start
// one the source does not know (see openShardConflicts).
func checkOpenShards(src foreignTable, stream streamInfo, plan importPlan, allowed map[string]bool) error {
	conflicts := openShardConflicts(src, stream, plan, allowed)
	if len(conflicts) == 0 {
		return nil
	}
	lines := make([]string, len(conflicts))
	for i, c := range conflicts {
		lines[i] = c.String()
	}
	return fmt.Errorf("the source does not fit stream %s (is it another application's table, or one of a stream of the same name deleted and created again?); nothing was written:\n  %s\n"+
		"to import it anyway, name each such shard with --%s <shardId>",
		stream.Name, strings.Join(lines, "\n  "), flagAllowOpenShard)
}

// allowedOpenShards is the set of shards named with --allow-open-shard.
func allowedOpenShards(c *cli.Context) map[string]bool {
	allowed := map[string]bool{}
	for _, v := range c.StringSlice(flagAllowOpenShard) {
		for _, id := range strings.Split(v, ",") {
			if id = strings.TrimSpace(id); id != "" {
				allowed[id] = true
			}
		}
	}
	return allowed
}
